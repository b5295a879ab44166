// Items as the tower consumes them, and packing a batch of items into the
// graph's input buffers (host staging, for replays and for capture alike).
#pragma once

#include "qwen_config.hpp"
#include "qwen_layout.hpp"
#include "qwen_preprocess.hpp"

#include <cstdint>
#include <vector>

namespace qwen {

// The graph's input buffers, in the order model_info declares them.
enum Buffer : int32_t {
  kPixelRows = 0,  // [patches, patch_dim] f32 (CPU) or bf16 (CUDA), window order; zero padding
  kRopeCos = 1,    // [patches, head_dim/2] f32, window order; zero padding
  kRopeSin = 2,    // idem
  kCuFrames = 3,   // [frames + 1] i32 patch offsets of full-attention sequences; repeat-last
  kCuWindows = 4,  // [windows + 1] i32 patch offsets of windows; repeat-last
  kInverse = 5,    // [tokens] i32: output token r is merged row inverse[r]; zero padding
  kNumBuffers = 6
};

// One item's inputs, already in window order so a batch is concatenation. The
// window reordering of patch rows happens here, once per item on the host,
// instead of as a gather on the device at every replay.
struct ItemData {
  Grid grid;
  int64_t frames = 1;                 // decoded frames (1 for an image)
  std::vector<float> pixels_f32;      // CPU instances
  std::vector<uint16_t> pixels_bf16;  // CUDA instances
  std::vector<float> cos, sin;        // [patches, head_dim/2]
  std::vector<int32_t> window_patches;
  std::vector<int32_t> inverse;  // item-local: token u -> window position
  int64_t tokens(const VisionConfig& c) const { return grid.patches() / c.merge_unit(); }
};

// `rows`: processor-order patch rows of `grid` (empty: zeros, for capture).
ItemData make_item_data(const Options& o, const Grid& grid, int64_t frames,
                        const std::vector<float>& rows);

// Where one batch's values go; capacities bound every table.
struct StagingTarget {
  void* pixels = nullptr;
  float* cos = nullptr;
  float* sin = nullptr;
  int32_t* cu_frames = nullptr;
  int32_t* cu_windows = nullptr;
  int32_t* inverse = nullptr;
  Capacity cap;
};

// Leading rows written into each buffer.
struct StagedRows {
  int64_t patches = 0;
  int64_t frame_rows = 0;   // entries of cu_frames written (sequences + 1)
  int64_t window_rows = 0;  // entries of cu_windows written
  int64_t tokens = 0;
};

// Concatenates the items; throws Error(INVALID_ARGUMENT) if they exceed a capacity.
StagedRows stage_batch(const Options& o, const std::vector<const ItemData*>& items,
                       const StagingTarget& target);

// Valid stand-in tables for warm-up and capture (with zero pixel and rotary
// rows): every row in some frame and some window, frames and windows as long
// as real ones may be, so the warm-up does a full batch's work. Written into
// host staging by prepare_capture_staging; the runtime copies them.
struct CaptureTables {
  std::vector<int32_t> cu_frames, cu_windows, inverse;
};
CaptureTables capture_tables(const VisionConfig& c, const Capacity& cap);

}  // namespace qwen
