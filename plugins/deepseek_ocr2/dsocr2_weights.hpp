// The vision side's parameters as f32 host arrays (and the CPU model over them), read by the
// checkpoint's names (DeepSeek's release layout `model.sam_model.*` / `model.qwen2_model.*`, or
// transformers' `[model.]vision_tower.*`, detected) or drawn at random.
#pragma once

#include "dsocr2_config.hpp"

#include <encoder_kit/weights.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dsocr2 {

struct SamLayerWeights {
  std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b;  // [D]
  std::vector<float> qkv_w, qkv_b;                        // [3D, D], [3D]
  std::vector<float> proj_w, proj_b;                      // [D, D], [D]
  std::vector<float> rel_h, rel_w;                        // [2w-1, hd] (w: window or pos grid)
  std::vector<float> lin1_w, lin1_b, lin2_w, lin2_b;      // [mlp, D], [mlp], [D, mlp], [D]
};

struct EncoderLayerWeights {
  std::vector<float> norm1, norm2;                  // [E]
  std::vector<float> q_w, q_b, k_w, k_b, v_w, v_b;  // [heads*hd | kv*hd, E], biases
  std::vector<float> o_w;                           // [E, heads*hd]
  std::vector<float> gate_w, up_w, down_w;          // [I, E], [I, E], [E, I]
};

struct Weights {
  std::vector<float> patch_w, patch_b;  // Conv2d [D, 3, p, p] (as [D, 3*p*p]), [D]
  std::vector<float> pos_embed;         // [G, G, D]
  std::vector<SamLayerWeights> sam;
  std::vector<float> neck1_w;                 // [C, D] (1x1 conv)
  std::vector<float> neck_ln1_w, neck_ln1_b;  // [C]
  std::vector<float> neck2_w;                 // [C, C, 3, 3]
  std::vector<float> neck_ln2_w, neck_ln2_b;  // [C]
  std::vector<float> down1_w, down2_w;        // [c1, C, 3, 3], [E, c1, 3, 3]
  std::vector<EncoderLayerWeights> encoder;
  std::vector<float> encoder_norm;               // [E]
  std::vector<float> query_local, query_global;  // query_768 [Lq, E], query_1024 [Gq, E]
  std::vector<float> proj_w, proj_b;             // [H, E], [H]
  std::vector<float> view_separator;             // [H]
  std::string layout;                            // "release", "transformers (prefix 'model.')", ...
};

int64_t parameter_count(const ModelConfig& c);

// Random weights: matrices N(0, 1/fan_in), biases N(0, 0.02^2), norm weights
// N(1, 0.1^2), positions and relative positions N(0, 0.5^2), queries and the
// separator N(0, 1): every parameter matters, so tests notice a wrong one.
Weights load_weights(const ModelConfig& c, const encoder_kit::WeightSource& source);

// The CPU model (dsocr2_cpu_forward.cpp): the vision side in fp32, views
// (global or local crops) through the SAM ViT, neck, downsampling, the
// Qwen2-style encoder with its learned queries and the projector. Position
// tables that depend only on the view size (the interpolated pos_embed, the
// resized relative-position tables, rotary) are built once per view size.
// Position tables that depend only on the view size (shared with the CUDA path).
struct ViewTables {
  int64_t side = 0, grid = 0;
  std::vector<float> pos;                        // [g*g, D]: pos_embed at this grid
  std::vector<std::vector<float>> rel_h, rel_w;  // per layer [2*win-1, hd]
  std::vector<float> cos, sin;                   // encoder rotary [2*tokens, hd/2]
};
ViewTables view_tables(const ModelConfig& m, const Weights& w, int64_t side);

class CpuModel {
 public:
  CpuModel(const ModelConfig& m, Weights w);

  // `count` views of `side` pixels (global_size or tile_size), planar CHW one
  // after another, into out [count * view_tokens(side), text_hidden_size].
  void encode(const float* views, int64_t count, int64_t side, float* out) const;

  const Weights& weights() const { return w_; }

 private:
  void encode_one(const float* view, const ViewTables& t, float* out) const;

  ModelConfig m_;
  Weights w_;
  ViewTables global_, local_;
};

}  // namespace dsocr2
