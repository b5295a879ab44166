// Items as the tower consumes them, and packing a batch of items into the
// graph's input buffers (host staging, for replays and for capture alike).
#pragma once

#include "config.hpp"
#include "layout.hpp"

#include <cstdint>
#include <vector>

namespace qwen_vl {

// The graph's input buffers: their indices in the order model_info declares
// them. A version declares what its blocks read; absent ones are -1.
//   pixel_rows         [patches, patch_dim] f32 (CPU) or bf16 (CUDA), unit order; zero padding
//   pos_index          [patches, 4] i32 pos_embed rows of the 4 corners; zero padding
//   pos_weight         [patches, 4] f32 bilinear weights; zero padding (no pos_embed)
//   rope_cos, rope_sin [patches, head_dim/2] f32, unit order; zero padding
//   cu_seqlens         [frames + 1] i32 patch offsets of full-attention sequences; repeat-last
//   cu_window_seqlens  [windows + 1] i32 patch offsets of windows; repeat-last
//   token_index        [tokens] i32: output token r is merged row token_index[r]; zero
//                      padding (named inverse_window_index under windows)
struct Buffers {
  int32_t pixel_rows = -1;
  int32_t pos_index = -1, pos_weight = -1;  // PosEmbed::Interpolated
  int32_t rope_cos = -1, rope_sin = -1;
  int32_t cu_seqlens = -1;
  int32_t cu_window_seqlens = -1;  // Attention::Windowed
  int32_t token_index = -1;
  int32_t count = 0;
  // The version's buffers, numbered in declaration order.
  explicit Buffers(const Spec& s);
};

// One item's inputs, already in unit order so a batch is concatenation. The
// window reordering of patch rows happens here, once per item on the host,
// instead of as a gather on the device at every replay.
struct ItemData {
  Grid grid;
  int64_t frames = 1;                 // decoded frames (1 for an image)
  std::vector<float> pixels_f32;      // CPU instances
  std::vector<uint16_t> pixels_bf16;  // CUDA instances
  std::vector<int32_t> pos_index;     // [patches, 4] (PosEmbed::Interpolated)
  std::vector<float> pos_weight;      // [patches, 4] (PosEmbed::Interpolated)
  std::vector<float> cos, sin;        // [patches, head_dim/2]
  std::vector<int32_t> window_patches;
  std::vector<int32_t> inverse;  // item-local: token u -> its unit's position
  int64_t tokens(const VisionConfig& c) const { return grid.patches() / c.merge_unit(); }
};

// `rows`: processor-order patch rows of `grid` (empty: zeros, for capture).
ItemData make_item_data(const Options& o, const Grid& grid, int64_t frames,
                        const std::vector<float>& rows);

// Where one batch's values go; capacities bound every table. Tables a
// version lacks stay null.
struct StagingTarget {
  void* pixels = nullptr;
  float* cos = nullptr;
  float* sin = nullptr;
  int32_t* cu_seqlens = nullptr;
  int32_t* cu_windows = nullptr;
  int32_t* token_index = nullptr;
  Capacity cap;
  int32_t* pos_index = nullptr;
  float* pos_weight = nullptr;
};

// Leading rows written into each buffer.
struct StagedRows {
  int64_t patches = 0;
  int64_t frame_rows = 0;   // entries of cu_seqlens written (sequences + 1)
  int64_t window_rows = 0;  // entries of cu_windows written
  int64_t tokens = 0;
};

// Concatenates the items, longest frame first (see full_attention_buckets);
// output tokens stay in batch order through token_index. Throws
// Error(INVALID_ARGUMENT) if they exceed a capacity.
StagedRows stage_batch(const Options& o, const std::vector<const ItemData*>& items,
                       const StagingTarget& target);

// Valid stand-in tables for warm-up and capture (with zero pixel, weight and
// rotary rows): every row in some frame and some window, frames and windows as
// long as real ones may be, so the warm-up does a full batch's work. Written
// into host staging by prepare_capture_staging; the runtime copies them.
struct CaptureTables {
  std::vector<int32_t> cu_seqlens, cu_windows, token_index;
};
CaptureTables capture_tables(const VisionConfig& c, const Capacity& cap);

}  // namespace qwen_vl
