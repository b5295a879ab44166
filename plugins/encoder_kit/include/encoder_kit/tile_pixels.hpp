// The CPU side of tiled ViT preprocessing that the plugins cutting images into
// tower-sized tiles do alike: 8-bit pixels to RGB, PIL-exact resizes, tile
// cutting and synthetic tiles (pixel_rows.hpp turns a tile into patch rows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace encoder_kit {

// Throws Error(INVALID_ARGUMENT) "<plugin>: pixels must have 1, 3 or 4
// channels, got <channels>" for any other count.
void require_pixel_channels(const std::string& plugin, int64_t channels);

// `pixels` pixels of 1 (grey), 3 (RGB) or 4 (RGBA: alpha dropped) channels as RGB.
std::vector<uint8_t> to_rgb(const uint8_t* px, int64_t pixels, int64_t channels);

// An h x w RGB image resized to out_h x out_w (bilinear, else bicubic) as PIL
// does; at the same size, a copy (PIL's resize returns one).
std::vector<uint8_t> resize_rgb(const uint8_t* rgb, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool bilinear);

// Calls fn(tile) for each side x side tile of a (rows * side) x (cols * side)
// RGB canvas, row by row, left to right; tile: side x side x 3 bytes.
template <class Fn>
void for_each_tile(const uint8_t* canvas, int64_t rows, int64_t cols, int64_t side, Fn&& fn) {
  const int64_t canvas_w = cols * side;
  std::vector<uint8_t> tile(static_cast<size_t>(side * side * 3));
  for (int64_t ty = 0; ty < rows; ++ty)
    for (int64_t tx = 0; tx < cols; ++tx) {
      for (int64_t y = 0; y < side; ++y)
        std::copy_n(canvas + ((ty * side + y) * canvas_w + tx * side) * 3, side * 3,
                    tile.begin() + y * side * 3);
      fn(static_cast<const uint8_t*>(tile.data()));
    }
}

// A side x side RGB tile of uniform random bytes, the same for the same
// (seed, stream): the synthetic items of benchmarks and warm-up.
std::vector<uint8_t> synthetic_rgb_tile(int64_t side, uint64_t seed, uint64_t stream);

}  // namespace encoder_kit
