// Batches of items in the graph's input buffers. An item is an image (its
// base tile and grid tiles) or a video (one tile per frame); every tile is
// one attention sequence of rows_per_tile tower rows. Budgets count tiles, so
// pooled video frames and unpooled image tiles share every graph: what
// differs between them is only the packing plan, a buffer like the pixels.
#pragma once

#include "llava_config.hpp"
#include "llava_pack.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <vector>

namespace llava_onevision {

// The graph's input buffers, in the order model_info declares them. The
// first two are the SigLIP tower's (siglip::Buffer), at the same indices.
enum Buffer : int32_t {
  kPixelRows = 0,   // [tiles x rows_per_tile, patch_cols] f32 (CPU) or bf16 (CUDA); zero padding
  kCuSeqlens = 1,   // [tiles + 1] i32 tower-row offsets of the tiles; repeat-last padding
  kPackSrc = 2,     // [out rows, kTaps] i32 projected rows (-1: image_newline); zero padding
  kPackWeight = 3,  // [out rows, kTaps] f32 weights; zero padding (padded rows are zero)
  kNumBuffers = 4
};

struct Capacity {
  int64_t tiles = 0;
  int64_t tower_rows(const ModelConfig& c) const { return tiles * c.rows_per_tile(); }
  int64_t out_rows(const ModelConfig& c) const { return tiles * c.max_out_rows_per_tile(); }
};
Capacity capacity_for(const Options& o, int64_t token_budget);

// One item's patch rows in the instance's dtype, its tile count and its plan.
struct ItemData {
  int64_t tiles = 0;
  int64_t frames = 1;  // a video's frames; 1 for an image
  PackPlan plan;
  std::vector<float> rows_f32;      // CPU instances
  std::vector<uint16_t> rows_bf16;  // CUDA instances
};
// The plan and tile count of an item of this geometry (check_geometry first).
struct ItemShape {
  int64_t tiles = 0;
  int64_t frames = 1;
  PackPlan plan;
};
ItemShape item_shape(const Options& o, const eg_item_desc& d);
ItemData make_item_data(const Options& o, ItemShape shape, const std::vector<float>& rows);

struct StagedRows {
  int64_t pixel_rows = 0;
  int64_t cu_entries = 0;
  int64_t out_rows = 0;
};

// Concatenates the batch's tiles and plans (sources moved to each item's
// first tower row) into host staging; throws Error(INVALID_ARGUMENT) when
// they do not fit.
StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels, int32_t* cu_seqlens,
                       int32_t* pack_src, float* pack_weight);

// Offsets with every tile of the graph a full sequence (the warm-up does a
// full batch's work).
std::vector<int32_t> full_cu_seqlens(const Options& o, const Capacity& cap);

// Checks a plan a forward is handed: every source a projected row of the
// graph or the newline, every weight finite. Throws Error(INVALID_ARGUMENT)
// naming the entry (a bad table must fail, not read wild).
void check_plan(const Options& o, const Capacity& cap, const int32_t* src, const float* weight);

}  // namespace llava_onevision
