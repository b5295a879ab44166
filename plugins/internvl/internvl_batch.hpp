// Batches of images in the graph's input buffers. An item is one image: its
// tiles, each one attention sequence of seq_per_tile rows (the CLS row, then
// its patches). Budgets count output rows, rows_per_tile per tile, so a graph
// of budget B holds B / rows_per_tile tiles.
#pragma once

#include "internvl_config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <vector>

namespace internvl {

// The graph's input buffers, in the order model_info declares them.
enum Buffer : int32_t {
  kPixelRows = 0,  // [tiles x patches_per_tile, patch_cols] f32 (CPU) or bf16 (CUDA); zero padding
  kCuSeqlens = 1,  // [tiles + 1] i32 encoder-row offsets of the tiles; repeat-last padding
  kNumBuffers = 2
};

struct Capacity {
  int64_t tiles = 0;
  int64_t patch_rows(const ModelConfig& c) const { return tiles * c.patches_per_tile(); }
  int64_t seq_rows(const ModelConfig& c) const { return tiles * c.seq_per_tile(); }
  int64_t out_rows(const ModelConfig& c) const { return tiles * c.rows_per_tile(); }
};
Capacity capacity_for(const Options& o, int64_t token_budget);

// One image's patch rows in the instance's dtype, and its tile count.
struct ItemData {
  int64_t tiles = 0;
  std::vector<float> rows_f32;      // CPU instances
  std::vector<uint16_t> rows_bf16;  // CUDA instances
};
ItemData make_item_data(const Options& o, int64_t tiles, const std::vector<float>& rows);

struct StagedRows {
  int64_t pixel_rows = 0;
  int64_t cu_entries = 0;
};

// Concatenates the batch's tiles into host staging; throws
// Error(INVALID_ARGUMENT) when they do not fit.
StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels,
                       int32_t* cu_seqlens);

// Offsets with every tile of the graph a full sequence (the warm-up does a
// full batch's work).
std::vector<int32_t> full_cu_seqlens(const Options& o, const Capacity& cap);

// Checks offsets a forward is handed: each sequence is one whole tile at its
// place or empty (padding); returns the tiles covered. Throws
// Error(INVALID_ARGUMENT) naming the entry otherwise (a bad table must fail,
// not index wild).
int64_t check_cu_seqlens(const Options& o, const Capacity& cap, const int32_t* cu, int64_t n);

}  // namespace internvl
