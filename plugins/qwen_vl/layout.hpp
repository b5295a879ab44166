// The tower's input side, from decoded pixels to the graph's buffers.
//
// The Qwen-VL processors (preprocess.cpp), from decoded pixels to flattened
// patch rows. Images: the Qwen2-VL image processor's smart_resize to
// multiples of the resize factor within [min_pixels, max_pixels]. Videos: each
// frame as an image (VideoPixels::PerFrame), or Qwen3VLVideoProcessor's rule,
// whose bounds count every frame (AllFrames). Then bicubic resize, v/255,
// normalisation with the version's mean/std, time padded to a multiple of
// temporal_patch_size by repeating the last frame, and patches flattened in
// the processor's order.
//
// Then (layout.cpp) where each patch of an item goes inside the tower, and how
// many sequences a batch can hold:
//  - the unit order: Attention::Windowed regroups merged units (2x2 patches)
//    window by window, as Qwen2.5-VL's get_window_index does; patch rows,
//    per-patch tables and the attention sequences all live in this order, and
//    the inverse permutation restores the processor's order of the output
//    tokens. Attention::Full keeps the processor's order (the identity);
//  - 2-D rotary angles per patch (row position, then column position);
//  - the learned position embedding's bilinear interpolation to the item's
//    grid (fast_pos_embed_interpolate): 4 corner rows and 4 weights per patch;
//  - per-budget capacities of the attention sequence tables.
//
// Then (batch.cpp) items as the tower consumes them, and packing a batch of
// items into the graph's input buffers (host staging, for replays and for
// capture alike).
#pragma once

#include "config.hpp"

#include <encgraph/plugin_api.h>
#include <encoder_kit/seq_buckets.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace qwen_vl {

// Patch grid of one item: temporal patches, rows, columns (patches).
struct Grid {
  int64_t t = 0, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

// The image processor's resize rule: (height, width) rounded to multiples of
// `factor`, scaled to keep the pixel count within [min_pixels, max_pixels].
// Rounding is Python's (half to even). Throws for an aspect ratio over 200.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels);

// The video processor's rule: bounds on frames x height x width; a side under
// `factor` is scaled up first. Throws when frames < temporal_factor (as the
// processor does) or for an aspect ratio over 200.
std::pair<int64_t, int64_t> smart_resize_video(int64_t frames, int64_t height, int64_t width,
                                               int64_t temporal_factor, int64_t factor,
                                               int64_t min_pixels, int64_t max_pixels);

// The grid an item of this geometry gets (`video`: the version's video rule).
Grid grid_for(const Options& o, bool video, int64_t height, int64_t width, int64_t frames);

// Patch rows [grid.patches(), patch_dim] in the processor's order (temporal
// patch, merge blocks row-major, the patches of a block; within a row
// channel, time, patch row, patch column) from `frames` HWC uint8 frames of
// `channels` (3 RGB, 1 grey, 4 RGBA with alpha ignored).
std::vector<float> patch_rows_from_pixels(const Options& o, bool video, const uint8_t* pixels,
                                          int64_t frames, int64_t height, int64_t width,
                                          int64_t channels);

// Synthetic patch rows for `grid`: normalised values of pixels drawn uniformly
// from [0, 255] with `seed` (same values on every device).
std::vector<float> synthetic_patch_rows(const VisionConfig& c, const Grid& grid, uint64_t seed);

struct WindowLayout {
  // unit_order[k]: the processor-order merged unit at position k.
  std::vector<int32_t> unit_order;
  // inverse[u]: the position of processor-order unit u.
  std::vector<int32_t> inverse;
  // Patches in each (non-empty) window, in window order (none without windows).
  std::vector<int32_t> window_patches;
};

WindowLayout window_layout(const VisionConfig& c, const Grid& g);

// Rotary cos/sin of every patch in `unit_order`, [patches, head_dim/2] each:
// the first head_dim/4 angles use the patch's row, the rest its column, with
// inverse frequencies 10000^(-2i / (head_dim/2)).
void rotary_tables(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                   float* cos, float* sin);

// torch.linspace(0, end, steps) in float32, as ATen computes it (the upper
// half counted back from `end`).
std::vector<float> linspace_f32(float end, int64_t steps);

// Rows of the learned position grid summed per patch: 4 (bilinear), 16
// (bicubic) or 0 (none).
int64_t pos_taps(const Spec& s);

// [patches, pos_taps] rows of pos_embed and [patches, pos_taps] weights of
// every patch in `unit_order`. Interpolated: corners in the model's order
// (floor/floor, floor/ceil, ceil/floor, ceil/ceil); Bicubic: rows y-1..y+2,
// each columns x-1..x+2, clamped into the grid.
void pos_embed_tables(const VisionConfig& c, const Grid& g, const std::vector<int32_t>& unit_order,
                      int32_t* index, float* weight);

// Capacities of one graph's buffers. Budgets count output tokens (merged
// units); each is merge_unit() patches.
struct Capacity {
  int64_t tokens = 0;
  int64_t patches = 0;
  int64_t frames = 0;              // full-attention sequences (one per temporal patch of an item)
  int64_t windows = 0;             // window-attention sequences (0 without windows)
  int64_t max_frame_patches = 0;   // longest full-attention sequence
  int64_t max_window_patches = 0;  // longest window
};

// Bounds, not guesses: a batch holds at most shape.max_frames_per_batch
// decoded frames (the runtime's packer bounds them), a frame holds at least
// min_frame_units(o) and at most max_frame_units(o) units, and a frame of u
// units has at most ceil(u / window_units) windows, so a batch of T tokens in
// F frames has at most (T + (window_units - 1) F) / window_units windows.
// Sizing the window table by this instead of by the token count keeps
// replays from sweeping thousands of empty sequences.
Capacity capacity_for(const Options& o, const eg_graph_shape& shape);

// Fewest merged units the processors can give a frame under these options.
int64_t min_frame_units(const Options& o);
// Most merged units the processors can give one frame (images or videos).
int64_t max_frame_units(const Options& o);

// The full-attention launches over the frame table's sequences. A rectangular
// grid over cap.frames sequences of up to cap.max_frame_patches would be mostly
// empty blocks; stage_batch lays frames out longest first, so the i-th
// (0-based) holds at most patches / (i + 1) rows, and encoder_kit's
// length_buckets launches sequences [2^j - 1, 2^(j+1) - 1) with max_seqlen
// patches / 2^j, small launches merged up to merge_units
// (encoder_kit/seq_buckets.hpp).
using encoder_kit::SeqBucket;
std::vector<SeqBucket> full_attention_buckets(
    const Capacity& cap, int64_t merge_units = encoder_kit::default_bucket_merge_units());

// The graph's input buffers: their indices in the order model_info declares
// them. A version declares what its blocks read; absent ones are -1.
//   pixel_rows         [patches, patch_dim] f32 (CPU) or bf16 (CUDA), unit order; zero padding
//   pos_index          [patches, pos_taps] i32 pos_embed rows of the taps; zero padding
//   pos_weight         [patches, pos_taps] f32 tap weights; zero padding (no pos_embed)
//   rope_cos, rope_sin [patches, head_dim/2] f32, unit order; zero padding
//   cu_seqlens         [frames + 1] i32 patch offsets of full-attention sequences; repeat-last
//   cu_window_seqlens  [windows + 1] i32 patch offsets of windows; repeat-last
//   token_index        [tokens] i32: output token r is merged row token_index[r]; zero
//                      padding (named inverse_window_index under windows)
struct Buffers {
  int32_t pixel_rows = -1;
  int32_t pos_index = -1, pos_weight = -1;  // PosEmbed::Interpolated / Bicubic
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
  std::vector<int32_t> pos_index;     // [patches, pos_taps] (a learned position grid)
  std::vector<float> pos_weight;      // [patches, pos_taps]
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
