// GotOcr2ImageProcessor's tiling (crop_to_patches) as InternVL runs it, and an
// image from decoded pixels to the encoder's patch rows.
//
// The grid: among every (columns, rows) with min_patches <= columns x rows <=
// max_patches, listed by columns then rows and stably sorted by their product,
// the first whose columns / rows is closest to the image's width / height; on
// an exact tie a later grid wins while the image's area exceeds half the
// grid's canvas. The image is resized (bicubic) to the canvas, cut into tiles
// row by row, and, when there is more than one, followed by a thumbnail: the
// whole image resized to one tile. Each tile is rescaled by 1/255, normalised
// with the processor's mean and std, and cut into patches as the Conv2d sees
// them (row-major over the grid, each patch's values in channel, row, column
// order), pad columns zero.
#pragma once

#include "internvl_config.hpp"

#include <cstdint>
#include <vector>

namespace internvl {

struct TileGrid {
  int64_t columns = 1;
  int64_t rows = 1;
};

// get_optimal_tiled_canvas for an image of height x width and square tiles of `tile`.
TileGrid optimal_grid(int64_t height, int64_t width, int64_t tile, int64_t min_tiles,
                      int64_t max_tiles);

// Tiles the processor makes of an image (the grid's, plus the thumbnail when
// the grid has more than one): the item's size in the budgets' unit / 256.
int64_t tile_count(const Options& o, int64_t height, int64_t width);

// Every check item_create makes on an item's geometry: one frame of an image,
// each side in [1, kMaxSide]. Throws Error(INVALID_ARGUMENT).
void check_geometry(const eg_item_desc& d);

// pixels: height x width x channels bytes (1 grey, 3 RGB, 4 RGBA with alpha
// dropped). Returns [tiles x patches_per_tile, patch_cols] f32 rows.
std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t height,
                                          int64_t width, int64_t channels);

// `tiles` tiles of uniform random bytes drawn from `seed` at the tile size:
// an item without pixels costs what a real one of its geometry costs.
std::vector<float> synthetic_patch_rows(const Options& o, int64_t tiles, uint64_t seed);

}  // namespace internvl
