// Test images for the host suites: RGB gradients written with stb, whose values
// depend on position, channel and `shift`, so that two images of one size (or
// two frames of a clip) differ.
#pragma once

#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include <filesystem>
#include <vector>

namespace host_test {

inline void write_gradient(const std::filesystem::path& p, int w, int h, int shift = 0,
                           bool jpeg = false) {
  std::vector<unsigned char> px(static_cast<size_t>(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        px[static_cast<size_t>((y * w + x) * 3 + c)] =
            static_cast<unsigned char>((x * 7 + y * 3 + c * 50 + shift * 37) % 256);
  if (jpeg)
    REQUIRE(stbi_write_jpg(p.c_str(), w, h, 3, px.data(), 95));
  else
    REQUIRE(stbi_write_png(p.c_str(), w, h, 3, px.data(), w * 3));
}

}  // namespace host_test
