// The packing of projected tower rows into the rows the language model
// consumes, planned on the host as a weighted gather: every output row is
// up to four source rows times weights, or image_newline. One plan covers
// pack_image_features (base image, grid map, unpad crop, anyres_max
// bilinear shrink, a newline per row) and the video path (apply_pooling's
// 2x2 bilinear shrink of each frame, one newline per video), so the forward
// runs the same gather for both.
#pragma once

#include "llava_config.hpp"
#include "llava_tiling.hpp"

#include <cstdint>
#include <vector>

namespace llava_onevision {

inline constexpr int kTaps = 4;             // sources per output row
inline constexpr int32_t kNewlineRow = -1;  // a source that is image_newline

// One item's plan, its sources relative to the item's first tower row.
struct PackPlan {
  std::vector<int32_t> src;   // [rows, kTaps]; unused taps: row 0 with weight 0
  std::vector<float> weight;  // [rows, kTaps]
  int64_t rows() const { return static_cast<int64_t>(src.size()) / kTaps; }
};

// torch.nn.functional.interpolate(mode="bilinear", align_corners=False) along
// one axis from `in` to `out` positions: for each output position, the two
// source positions and their weights (computed in float, as PyTorch does for
// float tensors).
struct Taps1d {
  int64_t lo = 0, hi = 0;
  float w_lo = 1.0f, w_hi = 0.0f;
};
std::vector<Taps1d> bilinear_taps(int64_t in, int64_t out);

PackPlan image_plan(const Options& o, const ImageLayout& l);
PackPlan video_plan(const Options& o, int64_t frames);

}  // namespace llava_onevision
