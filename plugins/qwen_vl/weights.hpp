// The tower's parameters as f32 host arrays, read by their checkpoint names
// (`visual.*` or `model.visual.*`, detected) or drawn at random. Both device
// paths start from these. A version's forms (spec.hpp) decide which exist;
// the others stay empty.
#pragma once

#include "config.hpp"

#include <encoder_kit/weights.hpp>

#include <string>
#include <vector>

namespace qwen_vl {

// `inter` is VisionConfig::mlp_width(). A bias the version lacks
// (attention_bias, Spec::block_biases) stays empty.
struct BlockWeights {
  std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b;  // [hidden] (biases: Norm::Layer)
  std::vector<float> qkv_w, qkv_b;                        // [3 hidden, hidden], [3 hidden]
  std::vector<float> proj_w, proj_b;                      // [hidden, hidden], [hidden]
  // The MLP's input product: gate_proj (Mlp::GatedSilu) or linear_fc1.
  std::vector<float> fc1_w, fc1_b;  // [inter, hidden], [inter]
  std::vector<float> up_w, up_b;    // up_proj (Mlp::GatedSilu): [inter, hidden], [inter]
  // The output product: down_proj or linear_fc2.
  std::vector<float> fc2_w, fc2_b;  // [hidden, inter], [hidden]
};

// Outputs::Downsample: the post-block RMSNorm, the downsample Conv2d as one
// product over a merged unit's rows, and GLM's merger (no biases but the
// LayerNorm's and the Conv2d's).
struct DownsampleWeights {
  std::vector<float> post_norm_w;  // post_layernorm [hidden]
  // downsample.weight [out, hidden, m, m] reordered to [out, m * m * hidden]:
  // column (u, c) takes feature c of the unit's u-th patch row (row-major in
  // the unit), so the Conv2d is a product with the unit's concatenated rows.
  std::vector<float> conv_w, conv_b;  // [out, 4 hidden], [out]
  std::vector<float> proj_w;          // merger.proj [out, out]
  std::vector<float> norm_w, norm_b;  // merger.post_projection_norm [out]
  std::vector<float> gate_w, up_w;    // merger.gate_proj / up_proj [intermediate, out]
  std::vector<float> down_w;          // merger.down_proj [out, intermediate]
};

// A patch merger: a norm over [hidden] (the main merger) or [4 hidden] (the
// deepstack mergers, use_postshuffle_norm), then fc1, erf GELU, fc2.
// Qwen2.5-VL's merger.ln_q / mlp.0 / mlp.2 are norm / fc1 / fc2.
struct MergerWeights {
  std::vector<float> norm_w, norm_b;  // [hidden] or [4 hidden] (bias: Norm::Layer)
  std::vector<float> fc1_w, fc1_b;    // [4 hidden, 4 hidden], [4 hidden]
  std::vector<float> fc2_w, fc2_b;    // [out, 4 hidden], [out]
};

struct Weights {
  std::vector<float> patch_embed_w;     // Conv3d [hidden, 3, 2, p, p] as [hidden, patch_dim]
  std::vector<float> patch_embed_b;     // [hidden] (Spec::patch_bias)
  std::vector<float> post_conv_norm_w;  // [hidden] (Spec::post_conv_norm)
  // [num_position_embeddings, hidden] (PosEmbed::Interpolated / Bicubic)
  std::vector<float> pos_embed;
  std::vector<BlockWeights> blocks;
  MergerWeights merger;
  std::vector<MergerWeights> deepstack;  // deepstack_merger_list, in config-list order
  DownsampleWeights downsample;          // Outputs::Downsample (then `merger` stays empty)
  std::string prefix;                    // "visual." or "model.visual." (random: "visual.")
};

// Values in the tower's parameters (checked arithmetic).
int64_t parameter_count(const VisionConfig& c);

// Refuses a tower whose f32 weights exceed the machine's memory, then reads
// them. Random weights: matrices N(0, 1/fan_in) so activations keep their
// scale at any width, biases N(0, 0.02^2), norm weights N(1, 0.1^2), norm
// biases N(0, 0.1^2), pos_embed N(0, 0.5^2): every parameter matters, so
// tests notice a wrong one.
Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& source);

}  // namespace qwen_vl
