// Per-patch tables of an item and per-graph capacities:
//  - the learned position embedding's bilinear interpolation to the item's
//    grid (fast_pos_embed_interpolate): 4 corner rows and 4 weights per patch;
//  - 2-D rotary angles per patch (row position, then column position);
//  - per-budget capacities of the graph's tables.
// Every table is in the processor's patch order (no window reordering in
// Qwen3-VL): temporal patch, merge block row-major, patch within the block.
#pragma once

#include "qwen3_config.hpp"
#include "qwen3_preprocess.hpp"

#include <encgraph/plugin_api.h>
#include <encoder_kit/seq_buckets.hpp>

#include <cstdint>
#include <vector>

namespace qwen3 {

// torch.linspace(0, end, steps) in float32, as ATen computes it (the upper
// half counted back from `end`).
std::vector<float> linspace_f32(float end, int64_t steps);

// [patches, 4] corner rows of pos_embed and [patches, 4] weights, corners in
// the model's order (floor/floor, floor/ceil, ceil/floor, ceil/ceil).
void pos_embed_tables(const VisionConfig& c, const Grid& g, int32_t* index, float* weight);

// Rotary cos/sin of every patch, [patches, head_dim/2] each: the first
// head_dim/4 angles use the patch's row, the rest its column, with inverse
// frequencies 10000^(-2i / (head_dim/2)) (float32, as the model computes them).
void rotary_tables(const VisionConfig& c, const Grid& g, float* cos, float* sin);

// Capacities of one graph's buffers. Budgets count output tokens (merged
// units); each is merge_unit() patches.
struct Capacity {
  int64_t tokens = 0;
  int64_t patches = 0;
  int64_t frames = 0;             // attention sequences (one per temporal patch of an item)
  int64_t max_frame_patches = 0;  // longest sequence
};

// Bounds, not guesses: a batch holds at most shape.max_frames_per_batch
// decoded frames (the runtime's packer keeps it), and a frame is at most
// max_frame_units(o) units.
Capacity capacity_for(const Options& o, const eg_graph_shape& shape);

// Most merged units the processors can give one frame (images or videos).
int64_t max_frame_units(const Options& o);

// The attention launches over cu_seqlens' sequences (encoder_kit's
// length_buckets: stage_batch lays frames out longest first, so the i-th,
// 0-based, holds at most patches / (i + 1) rows), small ones merged up to
// merge_units (encoder_kit/seq_buckets.hpp).
using encoder_kit::SeqBucket;
std::vector<SeqBucket> attention_buckets(
    const Capacity& cap, int64_t merge_units = encoder_kit::default_bucket_merge_units());

}  // namespace qwen3
