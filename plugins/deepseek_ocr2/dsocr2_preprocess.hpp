// DeepseekOcr2ImageProcessor on decoded pixels (docs/models/deepseek_ocr2.md):
// the global view (long side to global_size, centred pad with 127) and the
// local crops (a cols x rows grid of tile_size crops chosen from the aspect
// ratio, only for images larger than one tile), rescaled and normalised.
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

}  // namespace dsocr2
