// SiglipImageProcessor from decoded pixels to patch rows: convert to RGB,
// resize to image_size x image_size (bicubic by default, as PIL does it),
// rescale by 1/255, normalise with mean = std = 0.5, then cut into patches the
// way the Conv2d sees them (row-major over the grid, each patch's values in
// channel, row, column order: the weight's [C, p, p] flattening; pixels past
// the last whole patch are ignored, as the convolution's valid padding does).
#pragma once

#include "siglip_config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <vector>

namespace siglip {

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

}  // namespace siglip
