// Reading PNG and JPEG files with stb_image (Debian's libstb): the header for
// a file's geometry, or the whole image as 8-bit RGB.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace encgraph::host {

struct ImageInfo {
  int64_t height = 0;
  int64_t width = 0;
  int32_t channels = 0;  // as stored in the file (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA)
};

// One image, or a video's frames in one buffer: the layout eg_item_desc's
// `pixels` has.
struct DecodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int64_t frames = 1;
  int32_t channels = 3;         // always RGB: plugins preprocess 3-channel pixels
  std::vector<uint8_t> pixels;  // frames x height x width x channels, row-major
};

// Both throw encgraph::Error (kind Input) naming the file and stb's reason.
ImageInfo probe_image(const std::filesystem::path& file);
DecodedImage decode_image(const std::filesystem::path& file);

}  // namespace encgraph::host
