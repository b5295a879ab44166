#include "internvl_tiling.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/pixel_rows.hpp>
#include <encoder_kit/tile_pixels.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace internvl {
namespace {

using encoder_kit::fail;

// One tile (side x side x 3 bytes) appended as patch rows.
void patchify(const Options& o, const uint8_t* rgb, std::vector<float>& rows) {
  const ModelConfig& c = o.model;
  encoder_kit::image::append_tile_rows(
      encoder_kit::image::normalise_table(o.processor.mean, o.processor.std), rgb, c.image_size,
      c.patch_size, c.patch_cols(), rows);
}

std::vector<uint8_t> resize_rgb(const Options& o, const std::vector<uint8_t>& rgb, int64_t h,
                                int64_t w, int64_t out_h, int64_t out_w) {
  return encoder_kit::resize_rgb(rgb.data(), h, w, out_h, out_w, o.processor.bilinear);
}

}  // namespace

TileGrid optimal_grid(int64_t height, int64_t width, int64_t tile, int64_t min_tiles,
                      int64_t max_tiles) {
  std::vector<TileGrid> grids;
  for (int64_t c = 1; c <= max_tiles; ++c)
    for (int64_t r = 1; r <= max_tiles; ++r)
      if (c * r >= min_tiles && c * r <= max_tiles) grids.push_back({c, r});
  std::stable_sort(grids.begin(), grids.end(), [](const TileGrid& a, const TileGrid& b) {
    return a.columns * a.rows < b.columns * b.rows;
  });
  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double area = static_cast<double>(width) * static_cast<double>(height);
  double best_diff = INFINITY;
  TileGrid best;
  for (const TileGrid& g : grids) {
    const double diff =
        std::fabs(aspect - static_cast<double>(g.columns) / static_cast<double>(g.rows));
    if (diff < best_diff) {
      best_diff = diff;
      best = g;
    } else if (diff == best_diff &&
               area > 0.5 * static_cast<double>(tile) * static_cast<double>(tile) *
                          static_cast<double>(g.columns) * static_cast<double>(g.rows)) {
      best = g;
    }
  }
  return best;
}

int64_t tile_count(const Options& o, int64_t height, int64_t width) {
  const Processor& p = o.processor;
  if (!p.crop_to_patches || p.max_patches <= 1) return 1;
  const TileGrid g = optimal_grid(height, width, o.model.image_size, p.min_patches, p.max_patches);
  const int64_t n = g.columns * g.rows;
  return n == 1 ? 1 : n + 1;
}

void check_geometry(const eg_item_desc& d) {
  if (d.modality != EG_MODALITY_IMAGE)
    fail(EG_ERR_INVALID_ARGUMENT,
         "internvl: only images are supported (modality " + std::to_string(d.modality) + ")");
  if (d.frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "internvl: an image has exactly one frame, got " + std::to_string(d.frames));
  if (d.height <= 0 || d.width <= 0 || d.height > kMaxSide || d.width > kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "internvl: image of " + std::to_string(d.height) + "x" +
                                      std::to_string(d.width) + " needs each side in [1, " +
                                      std::to_string(kMaxSide) + "] pixels");
}

std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t height,
                                          int64_t width, int64_t channels) {
  encoder_kit::require_pixel_channels("internvl", channels);
  const std::vector<uint8_t> rgb = encoder_kit::to_rgb(pixels, height * width, channels);
  const int64_t side = o.model.image_size;
  std::vector<float> rows;
  const int64_t tiles = tile_count(o, height, width);
  if (tiles == 1) {
    patchify(o, resize_rgb(o, rgb, height, width, side, side).data(), rows);
    return rows;
  }
  const Processor& p = o.processor;
  const TileGrid g = optimal_grid(height, width, side, p.min_patches, p.max_patches);
  const std::vector<uint8_t> canvas =
      resize_rgb(o, rgb, height, width, g.rows * side, g.columns * side);
  encoder_kit::for_each_tile(canvas.data(), g.rows, g.columns, side,
                             [&](const uint8_t* tile) { patchify(o, tile, rows); });
  patchify(o, resize_rgb(o, rgb, height, width, side, side).data(), rows);  // the thumbnail
  return rows;
}

std::vector<float> synthetic_patch_rows(const Options& o, int64_t tiles, uint64_t seed) {
  std::vector<float> rows;
  for (int64_t t = 0; t < tiles; ++t)
    patchify(o,
             encoder_kit::synthetic_rgb_tile(o.model.image_size, seed,
                                             0x1417u + static_cast<uint64_t>(t))
                 .data(),
             rows);
  return rows;
}

}  // namespace internvl
