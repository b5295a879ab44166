// An image's views and what the paths carry. The views are
// DeepseekOcr2ImageProcessor's on decoded pixels (docs/models/deepseek_ocr2.md):
// the global view (long side to global_size, centred pad with 127) and the
// local crops (a cols x rows grid of tile_size crops chosen from the aspect
// ratio, only for images larger than one tile), rescaled and normalised
// (dsocr2_preprocess.cpp). The layout (dsocr2_layout.cpp): what each image
// sends down the `global` and `local` paths, how a batch's views are staged
// into a path's graph buffers, and how the two paths' outputs are assembled
// into get_image_features' per-image rows [local crop rows..., global rows,
// view_separator].
#pragma once

#include "dsocr2_config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <vector>

namespace dsocr2 {

// Every check item_create makes on a description's geometry (the plugin's
// item_create and item_spec_for_desc both call it, so they fail alike): one
// frame of an image, each side in [1, kMaxSide]. Throws Error(INVALID_ARGUMENT).
void check_geometry(const eg_item_desc& d);

struct CropGrid {
  int64_t cols = 0, rows = 0;  // 0 x 0: no local crops
  int64_t count() const { return cols * rows; }
};

// get_optimal_tiled_canvas when max(height, width) > tile_size, else no crops.
CropGrid crop_grid(const ModelConfig& m, int64_t height, int64_t width);

// Views as the SAM reads them: planar CHW floats, one view after another.
struct Views {
  std::vector<float> global;  // [3, global_size, global_size]
  std::vector<float> crops;   // [count, 3, tile_size, tile_size], crops row-major
  int64_t num_crops = 0;
};

// `pixels`: height x width x channels uint8 (1: gray, 3: RGB, 4: RGBA, alpha dropped).
Views preprocess(const ModelConfig& m, const uint8_t* pixels, int64_t height, int64_t width,
                 int64_t channels);

// Deterministic normalised values of the same shapes, for synthetic items.
Views synthetic_views(const ModelConfig& m, int64_t height, int64_t width, uint64_t seed);

enum Path : int32_t { kGlobal = 0, kLocal = 1, kNumPaths = 2 };
// Graph buffers, the same list for both paths (shapes differ by path).
enum Buffer : int32_t {
  kPixels = 0,     // [views, 3 * side * side] f32, planar views; zero padding
  kViewCount = 1,  // [1] i32: the batch's real views on this path; zero padding
  kNumBuffers = 2
};

// The item a plugin keeps: its preprocessed views.
struct ItemData {
  Views views;
  // With bf16 staging (CUDA) the views are converted once, when the item is
  // made, and the float copies dropped: staging a batch is then a copy.
  std::vector<uint16_t> global_bf16, crops_bf16;
  void to_bf16();
  int64_t output_rows(const ModelConfig& m) const {
    return views.num_crops * m.local_tokens() + m.global_tokens() + 1;
  }
  // In the path's unit: the query tokens the path outputs for this item.
  int64_t path_tokens(const ModelConfig& m, int32_t path) const {
    return path == kGlobal ? m.global_tokens() : views.num_crops * m.local_tokens();
  }
};

int64_t view_side(const ModelConfig& m, int32_t path);
int64_t view_tokens(const ModelConfig& m, int32_t path);
// Views a graph of `token_budget` tokens on `path` holds.
int64_t view_capacity(const ModelConfig& m, int32_t path, int64_t token_budget);

// Copies the batch's views of `path` (items in batch order; an item with no
// crops adds nothing to the local path) into `pixels` (room for `capacity`
// views; f32, or bf16 with `bf16` for the CUDA path). Returns the views
// written; throws Error(INVALID_ARGUMENT) past capacity.
int64_t stage_views(const ModelConfig& m, int32_t path, const std::vector<const ItemData*>& items,
                    void* pixels, int64_t capacity, bool bf16 = false);

// One image's rows from the paths' outputs: `local` / `global` point at the
// item's first crop / view rows; `out` gets [crops*Lq + Gq + 1, H].
void assemble_item(const ModelConfig& m, const ItemData& item, const float* local,
                   const float* global, const float* view_separator, float* out);

}  // namespace dsocr2
