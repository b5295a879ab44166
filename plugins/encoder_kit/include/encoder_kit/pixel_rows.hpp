// Pixels to a ViT's normalised patch rows, as the processors compute them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace encoder_kit::image {

// (v / 255 - mean[c]) / std[c] of every byte value v of each RGB channel, in
// double (the processors' float64 rescale and normalise) rounded to float:
// one lookup a value instead of two divisions. Make it once an image.
using NormaliseTable = std::array<std::array<float, 256>, 3>;

inline NormaliseTable normalise_table(const std::array<double, 3>& mean,
                                      const std::array<double, 3>& std) {
  NormaliseTable t{};
  for (size_t c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v)
      t[c][static_cast<size_t>(v)] =
          static_cast<float>((static_cast<double>(v) / 255.0 - mean[c]) / std[c]);
  return t;
}

// One side x side RGB tile appended to `rows` as its (side / patch)^2 patch
// rows of `cols` values (channel, y, x order; zeros past 3 * patch^2); pixels
// past the last whole patch are dropped, as a Conv2d's valid padding does.
inline void append_tile_rows(const NormaliseTable& t, const uint8_t* rgb, int64_t side,
                             int64_t patch, int64_t cols, std::vector<float>& rows) {
  const int64_t g = side / patch;
  const size_t first = rows.size();
  rows.resize(first + static_cast<size_t>(g * g * cols), 0.0f);
  for (int64_t gy = 0; gy < g; ++gy)
    for (int64_t gx = 0; gx < g; ++gx) {
      float* dst = rows.data() + first + (gy * g + gx) * cols;
      for (size_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < patch; ++y) {
          const uint8_t* line = rgb + ((gy * patch + y) * side + gx * patch) * 3 + ch;
          for (int64_t x = 0; x < patch; ++x) *dst++ = t[ch][line[x * 3]];
        }
    }
}

}  // namespace encoder_kit::image
