// Items as the tower consumes them, what one graph holds, and packing a batch
// into the graph's input buffers. Every image has the same token count, so a
// batch is its items' patch rows one after the other and the attention
// sequences are consecutive runs of tokens_per_image rows.
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
