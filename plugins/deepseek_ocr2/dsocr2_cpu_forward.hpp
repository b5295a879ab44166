// The vision side in fp32 on the CPU: views (global or local crops) through the
// SAM ViT, neck, downsampling, the Qwen2-style encoder with its learned queries
// and the projector. Position tables that depend only on the view size (the
// interpolated pos_embed, the resized relative-position tables, rotary) are
// built once per view size.
#pragma once

#include "dsocr2_config.hpp"
#include "dsocr2_weights.hpp"

#include <cstdint>
#include <vector>

namespace dsocr2 {

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
