// The released Qwen2-VL / Qwen2.5-VL image processor, from decoded pixels to
// flattened patch rows: smart_resize to multiples of 28 within [min_pixels,
// max_pixels], bicubic resize, rescale by 1/255, normalise with the CLIP
// mean/std, pad time to a multiple of temporal_patch_size by repeating the last
// frame, and flatten patches in the processor's order.
#pragma once

#include "qwen_config.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace qwen {

// Patch grid of one item: frames / temporal_patch_size, rows, columns (patches).
struct Grid {
  int64_t t = 0, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
};

// The processor's resize rule: (height, width) rounded to multiples of
// `factor`, scaled to keep the pixel count within [min_pixels, max_pixels].
// Rounding is Python's (half to even). Throws for an aspect ratio over 200.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels);

// The grid an item of this geometry gets.
Grid grid_for(const Options& o, int64_t height, int64_t width, int64_t frames);

// Patch rows [grid.patches(), patch_dim] in the processor's order (frames,
// then 2x2 merge blocks row-major, then the 4 patches of a block; within a row
// channel, time, patch row, patch column) from `frames` HWC uint8 frames of
// `channels` (3 RGB, 1 grey, 4 RGBA with alpha ignored).
std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t frames,
                                          int64_t height, int64_t width, int64_t channels);

// Synthetic patch rows for `grid`: normalised values of pixels drawn uniformly
// from [0, 255] with `seed` (same values on every device).
std::vector<float> synthetic_patch_rows(const VisionConfig& c, const Grid& grid, uint64_t seed);

}  // namespace qwen
