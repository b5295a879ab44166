// The encoder's parameters as f32 host arrays, read by transformers' names
// (<weight_prefix>vision_tower.embeddings.*, vision_tower.encoder.layer.N.*,
// vision_tower.layernorm.*, multi_modal_projector.*) or drawn at random, and
// the CPU forward over them.
//
// Two exact rewrites at load: the layer scales lambda_1 and lambda_2 are
// folded into the rows of the projection they scale (lambda * (W a + b) =
// (diag(lambda) W) a + lambda b), so each residual add is a plain fused
// accumulate; and the CLS token gets its position added once.
#pragma once

#include "internvl_batch.hpp"
#include "internvl_config.hpp"

#include <encoder_kit/prenorm_layer.hpp>
#include <encoder_kit/weights.hpp>

#include <cstddef>
#include <vector>

namespace internvl {

// layernorm_before/after as norm1/norm2 (no biases with rms_norm), qkv with a
// zero bias without attention_bias, projection_layer as proj times lambda_1,
// fc2 times lambda_2.
struct LayerWeights : encoder_kit::PreNormLayerWeights {
  std::vector<float> q_norm, k_norm;  // use_qk_norm: RMSNorm weights over all of q / k
};

struct Weights {
  std::vector<float> patch_w;  // Conv2d [hidden, C, p, p] as [hidden, patch_cols], zero-padded
  std::vector<float> patch_b;  // [hidden]
  std::vector<float> cls;      // cls_token + position_embeddings[0]: [hidden]
  std::vector<float> pos;      // position_embeddings[1:]: [patches_per_tile, hidden]
  std::vector<LayerWeights> layers;         // layers_to_run() of them
  std::vector<float> final_w, final_b;      // vision_tower.layernorm, when it runs
  std::vector<float> proj_ln_w, proj_ln_b;  // multi_modal_projector.layer_norm: [shuffled_width]
  std::vector<float> proj1_w, proj1_b;      // linear_1: [text_hidden, shuffled_width]
  std::vector<float> proj2_w, proj2_b;      // linear_2: [text_hidden, text_hidden]
};

// Refuses weights over the machine's memory, then reads them. Random weights:
// matrices N(0, 1/fan_in), biases N(0, 0.02^2), norm weights N(1, 0.1^2) and
// biases N(0, 0.05^2), positions and the CLS token N(0, 0.2^2), layer scales
// N(0.5, 0.1^2): every parameter matters, so tests notice a wrong one.
Weights load_weights(const Options& o, const encoder_kit::WeightSource& source);

// transformers' pixel_shuffle (downsample_ratio 1/s) as a gather: for each
// tile, output token (i, j) of its (grid/s)^2 concatenates, for a < s then
// b < s, the encoder row of patch (s i + a, s j + b) (CLS rows skipped).
// Returns the encoder row of each hidden-size slice, in output order.
std::vector<int64_t> pixel_shuffle_sources(const ModelConfig& c, int64_t tiles);

size_t cpu_workspace_bytes(const Options& o, const Capacity& cap);
// `buffers` in Buffer order; writes [cap.out_rows, text_hidden_size] f32.
void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 float* output, void* workspace, size_t workspace_bytes);

}  // namespace internvl
