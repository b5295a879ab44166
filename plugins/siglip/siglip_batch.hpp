// An image from decoded pixels to patch rows (siglip_preprocess.cpp), and
// batches of them in the graph's input buffers (siglip_batch.cpp).
//
// SiglipImageProcessor: convert to RGB, resize to image_size x image_size
// (bicubic by default, as PIL does it), rescale by 1/255, normalise with
// mean = std = 0.5, then cut into patches the way the Conv2d sees them
// (row-major over the grid, each patch's values in channel, row, column order:
// the weight's [C, p, p] flattening; pixels past the last whole patch are
// ignored, as the convolution's valid padding does).
//
// Every image has the same token count, so a batch is its items' patch rows
// one after the other and the attention sequences are consecutive runs of
// tokens_per_image rows.
#pragma once

#include "siglip_config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <vector>

namespace siglip {

// The graph's input buffers, in the order model_info declares them.
enum Buffer : int32_t {
  kPixelRows = 0,  // [rows, patch_cols] f32 (CPU) or bf16 (CUDA); zero padding
  kCuSeqlens = 1,  // [images + 1] i32 row offsets of the images; repeat-last padding
  kNumBuffers = 2
};

// What the graph of one eg_graph_shape holds. Budgets count result rows:
// tokens (a multiple of tokens_per_image when the runtime plans them) or, for
// pooled output, images.
struct Capacity {
  int64_t images = 0;  // attention sequences (cu_seqlens has images + 1 entries)
  int64_t rows = 0;    // patch rows through the encoder
  // Rows of `output`: the patch rows of last_hidden_state, one per image pooled.
  int64_t rows_of(Output output) const { return output == Output::Pooled ? images : rows; }
};
Capacity capacity_for(const Options& o, const eg_graph_shape& shape);

// Where one forward writes each output (nullptr: not asked for), rows as
// Capacity::rows_of gives, hidden_size columns in the instance's dtype.
struct OutputPtrs {
  void* last_hidden_state = nullptr;
  void* pooled = nullptr;
};

// Every check item_create makes on an item's geometry (the plugin's
// item_create and item_spec_for_desc both run it, so they accept and refuse
// the same items): one frame of an image, each side in [1, kMaxSide]. Throws
// Error(INVALID_ARGUMENT).
void check_geometry(const eg_item_desc& d);

// pixels: height x width x channels bytes (1 grey, 3 RGB, 4 RGBA with alpha
// ignored). Returns [tokens_per_image, patch_cols] with zero pad columns.
std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t height,
                                          int64_t width, int64_t channels);

// A synthetic image drawn at the model's resolution from `seed` (uniform
// bytes): resizing first would cost the host time and change nothing the
// encoder does.
std::vector<float> synthetic_patch_rows(const Options& o, uint64_t seed);

// One image's patch rows in the instance's dtype.
struct ItemData {
  std::vector<float> rows_f32;      // CPU instances
  std::vector<uint16_t> rows_bf16;  // CUDA instances
};
ItemData make_item_data(const Options& o, const std::vector<float>& rows);

struct StagedRows {
  int64_t pixel_rows = 0;
  int64_t cu_entries = 0;
};

// Concatenates the batch's items into host staging (pixels [cap.rows,
// patch_cols], cu_seqlens [cap.images + 1]); throws Error(INVALID_ARGUMENT)
// when they do not fit.
StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels,
                       int32_t* cu_seqlens);

// Stand-in offsets for warm-up and capture: as many whole images as the rows
// hold (a partial last one if fewer rows than an image), so the warm-up does a
// full batch's work; repeat-last after that.
std::vector<int32_t> capture_cu_seqlens(const Options& o, const Capacity& cap);

}  // namespace siglip
