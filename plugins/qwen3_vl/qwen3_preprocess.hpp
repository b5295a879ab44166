// Qwen3-VL's processors, from decoded pixels to flattened patch rows. Images:
// the Qwen2-VL image processor with factor 32 and mean = std = 0.5. Videos:
// Qwen3VLVideoProcessor, whose pixel bounds count every frame. Then bicubic
// resize, v/255, (v - 0.5)/0.5, time padded to a multiple of
// temporal_patch_size by repeating the last frame, patches flattened in the
// processor's order.
#pragma once

#include "qwen3_config.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace qwen3 {

// Patch grid of one item: temporal patches, rows, columns (patches).
struct Grid {
  int64_t t = 0, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

// The image processor's resize rule (Python rounding, half to even). Throws
// for an aspect ratio over 200.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels);

// The video processor's rule: bounds on frames x height x width; a side under
// `factor` is scaled up first. Throws when frames < temporal_factor (as the
// processor does) or for an aspect ratio over 200.
std::pair<int64_t, int64_t> smart_resize_video(int64_t frames, int64_t height, int64_t width,
                                               int64_t temporal_factor, int64_t factor,
                                               int64_t min_pixels, int64_t max_pixels);

// The grid an item of this geometry gets (`video`: the video processor's rule).
Grid grid_for(const Options& o, bool video, int64_t height, int64_t width, int64_t frames);

// Patch rows [grid.patches(), patch_dim] in the processor's order (temporal
// patch, 2x2 merge blocks row-major, the 4 patches of a block; within a row
// channel, time, patch row, patch column) from `frames` HWC uint8 frames of
// `channels` (3 RGB, 1 grey, 4 RGBA with alpha ignored).
std::vector<float> patch_rows_from_pixels(const Options& o, bool video, const uint8_t* pixels,
                                          int64_t frames, int64_t height, int64_t width,
                                          int64_t channels);

// Synthetic patch rows for `grid`: normalised values of pixels drawn uniformly
// from [0, 255] with `seed` (same values on every device).
std::vector<float> synthetic_patch_rows(const VisionConfig& c, const Grid& grid, uint64_t seed);

}  // namespace qwen3
