// Items as the tower consumes them, and packing a batch of items into the
// graph's input buffers (host staging, for replays and for capture alike).
#pragma once

#include "qwen3_config.hpp"
#include "qwen3_layout.hpp"
#include "qwen3_preprocess.hpp"

#include <cstdint>
#include <vector>

namespace qwen3 {

// The graph's input buffers, in the order model_info declares them.
enum Buffer : int32_t {
  kPixelRows = 0,   // [patches, patch_dim] f32 (CPU) or bf16 (CUDA); zero padding
  kPosIndex = 1,    // [patches, 4] i32 pos_embed rows of the 4 corners; zero padding
  kPosWeight = 2,   // [patches, 4] f32 bilinear weights; zero padding (no pos_embed)
  kRopeCos = 3,     // [patches, head_dim/2] f32; zero padding
  kRopeSin = 4,     // idem
  kCuSeqlens = 5,   // [frames + 1] i32 patch offsets of the attention sequences; repeat-last
  kTokenIndex = 6,  // [tokens] i32: output row r is merged row token_index[r]; zero padding
  kNumBuffers = 7
};

// One item's inputs in processor order, so a batch is concatenation.
struct ItemData {
  Grid grid;
  int64_t frames = 1;                 // decoded frames (1 for an image)
  std::vector<float> pixels_f32;      // CPU instances
  std::vector<uint16_t> pixels_bf16;  // CUDA instances
  std::vector<int32_t> pos_index;     // [patches, 4]
  std::vector<float> pos_weight;      // [patches, 4]
  std::vector<float> cos, sin;        // [patches, head_dim/2]
  int64_t tokens(const VisionConfig& c) const { return grid.patches() / c.merge_unit(); }
};

// `rows`: processor-order patch rows of `grid` (empty: zeros).
ItemData make_item_data(const Options& o, const Grid& grid, int64_t frames,
                        const std::vector<float>& rows);

// Where one batch's values go; capacities bound every table.
struct StagingTarget {
  void* pixels = nullptr;
  int32_t* pos_index = nullptr;
  float* pos_weight = nullptr;
  float* cos = nullptr;
  float* sin = nullptr;
  int32_t* cu_seqlens = nullptr;
  int32_t* token_index = nullptr;
  Capacity cap;
};

// Leading rows written into each buffer.
struct StagedRows {
  int64_t patches = 0;
  int64_t seq_rows = 0;  // entries of cu_seqlens written (sequences + 1)
  int64_t tokens = 0;
};

// Concatenates the items, longest frame first (see attention_buckets); output
// tokens stay in batch order through token_index. Throws
// Error(INVALID_ARGUMENT) if they exceed a capacity.
StagedRows stage_batch(const Options& o, const std::vector<const ItemData*>& items,
                       const StagingTarget& target);

// Valid stand-in tables for warm-up and capture (with zero pixel, weight and
// rotary rows): every row in some sequence, sequences as long as real ones
// may be, so the warm-up does a full batch's work.
struct CaptureTables {
  std::vector<int32_t> cu_seqlens, token_index;
};
CaptureTables capture_tables(const VisionConfig& c, const Capacity& cap);

}  // namespace qwen3
