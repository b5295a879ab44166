// The Qwen-VL processors, from decoded pixels to flattened patch rows. Images:
// the Qwen2-VL image processor's smart_resize to multiples of the resize
// factor within [min_pixels, max_pixels]. Videos: each frame as an image
// (VideoPixels::PerFrame), or Qwen3VLVideoProcessor's rule, whose bounds count
// every frame (AllFrames). Then bicubic resize, v/255, normalisation with the
// version's mean/std, time padded to a multiple of temporal_patch_size by
// repeating the last frame, and patches flattened in the processor's order.
#pragma once

#include "config.hpp"

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

}  // namespace qwen_vl
