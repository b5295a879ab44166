// The reference the patch-means plugins (examples/minimal_plugin, the abi10
// compatibility plugin) are checked against, computed here from the pixels,
// independently of either plugin: each 8x8 patch of an RGB image gives one row
// of its mean red, green and blue (over the pixels inside the image, scaled to
// [0, 1], times `scale`) and the patch's index in its image.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace patch_means {

struct Image {
  int64_t height, width;
  std::vector<uint8_t> pixels;  // height x width x 3
};

// A reproducible image whose patches all differ.
inline Image random_image(int64_t height, int64_t width, uint32_t seed) {
  Image im{height, width, std::vector<uint8_t>(static_cast<size_t>(height * width * 3))};
  uint32_t s = seed * 2654435761u + 12345u;
  for (uint8_t& p : im.pixels) {
    s = s * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(s >> 24);
  }
  return im;
}

// rows x 4 values, row-major.
inline std::vector<double> reference(const Image& im, double scale) {
  const int64_t ph = std::max<int64_t>(1, im.height / 8), pw = std::max<int64_t>(1, im.width / 8);
  std::vector<double> out;
  for (int64_t py = 0; py < ph; ++py)
    for (int64_t px = 0; px < pw; ++px) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        int64_t n = 0;
        for (int64_t y = py * 8; y < std::min(im.height, py * 8 + 8); ++y)
          for (int64_t x = px * 8; x < std::min(im.width, px * 8 + 8); ++x, ++n)
            sum += im.pixels[static_cast<size_t>((y * im.width + x) * 3 + c)] / 255.0;
        out.push_back(scale * sum / static_cast<double>(n));
      }
      out.push_back(static_cast<double>(py * pw + px));
    }
  return out;
}

}  // namespace patch_means
