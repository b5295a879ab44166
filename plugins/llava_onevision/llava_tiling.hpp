// LlavaOnevisionImageProcessor's anyres tiling and the model's unpadding, as
// pure functions of an image's size, and an item from decoded pixels to the
// tower's patch rows.
//
// An image: select_best_resolution picks, among image_grid_pinpoints, the
// resolution that keeps the most of the image's pixels once it is scaled to
// fit (ties: the least wasted canvas); the image is resized keeping its
// aspect (the fitting side exact, the other rounded up) and centred on a
// zero canvas of that resolution, which is cut into tiles row by row. The
// whole image resized to one tile comes first (the base image). A video: each
// frame resized to one tile. Every tile is rescaled by 1/255, normalised and
// cut into patches as the Conv2d sees them.
//
// The model (pack_image_features) lays the grid tiles' features out as one
// map of rows x columns patches, crops the canvas padding back off
// (unpad_image), and shrinks a map above max_num_patches tiles' worth of
// positions by bilinear interpolation.
#pragma once

#include "llava_config.hpp"

#include <cstdint>
#include <vector>

namespace llava_onevision {

// select_best_resolution for an image of height x width.
Resolution select_best_resolution(int64_t height, int64_t width,
                                  const std::vector<Resolution>& pinpoints);

// get_patch_output_size: the image resized into `target` keeping its aspect.
Resolution patch_output_size(int64_t height, int64_t width, Resolution target);

// Python's float floor division a // b for positive operands (math.floor of
// the exact quotient, as CPython computes it).
double python_floor_div(double a, double b);

// The feature-map geometry of one image.
struct ImageLayout {
  Resolution best;        // the chosen canvas
  int64_t grid_rows = 1;  // tiles down the canvas
  int64_t grid_cols = 1;  // tiles across
  int64_t crop_top = 0;   // first kept row of the (grid_rows x grid) map
  int64_t crop_left = 0;  // first kept column
  int64_t map_h = 0;      // the unpadded map
  int64_t map_w = 0;
  int64_t out_h = 0;  // after the anyres_max interpolation (the map when none)
  int64_t out_w = 0;
  int64_t tiles() const { return grid_rows * grid_cols + 1; }  // the base image too
  bool interpolated() const { return out_h != map_h || out_w != map_w; }
};
ImageLayout image_layout(const Options& o, int64_t height, int64_t width);

// Output rows of an item: the base image's rows, then out_h x (out_w + 1)
// (an image_newline after every row); a video: rows_per_frame per frame and
// one image_newline.
int64_t image_out_rows(const Options& o, const ImageLayout& l);
int64_t video_out_rows(const Options& o, int64_t frames);

// Every check item_create makes on an item's geometry: an image (one frame)
// or a video (1..max_frames_per_video frames), each side in [1, kMaxSide].
// Throws Error(INVALID_ARGUMENT).
void check_geometry(const Options& o, const eg_item_desc& d);

// pixels: frames x height x width x channels bytes (1 grey, 3 RGB, 4 RGBA
// with alpha dropped). Returns [tiles x rows_per_tile, patch_cols] f32 rows:
// an image's base tile then its grid tiles, or a video's frames.
std::vector<float> patch_rows_from_pixels(const Options& o, const eg_item_desc& d);

// `tiles` tiles of uniform random bytes drawn from `seed` at the tile size:
// an item without pixels costs what a real one of its geometry costs.
std::vector<float> synthetic_patch_rows(const Options& o, int64_t tiles, uint64_t seed);

}  // namespace llava_onevision
