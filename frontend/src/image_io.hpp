// Reading PNG and JPEG files: the format is recognised by its signature and
// the geometry read from the header by this module (so that every error says
// what is really wrong with the file, and a huge image is refused before a
// byte of it is decoded); the pixels are decoded by libjpeg-turbo and libpng
// to the same 8-bit RGB bytes as Pillow's Image.open(f).convert("RGB"), with
// the EXIF orientation applied as transformers' load_image applies it
// (image_decoders.hpp). Other formats (GIF, BMP, PGM, ...) are refused.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace encgraph::host {

struct ImageInfo {
  int64_t height = 0;  // as displayed: after the EXIF orientation
  int64_t width = 0;
  int32_t channels = 0;     // as stored in the file (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA)
  int32_t orientation = 1;  // EXIF orientation 1..8 (1: none, 5..8 swap the sides)
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

// The header of a PNG or JPEG file. Throws encgraph::Error (kind Input) naming
// the file when it is not a regular file, not PNG or JPEG (naming the format
// when it is a known other one), has a malformed or truncated header, or holds
// more than `max_pixels` pixels (limits.max_image_pixels).
ImageInfo probe_image(const std::filesystem::path& file, int64_t max_pixels);

// The whole image as RGB, after probe_image's checks. With `expected`, the
// header must still give that size (the file was probed when the workload was
// read and may have changed since). Errors keep the decoder's own reason.
DecodedImage decode_image(const std::filesystem::path& file, int64_t max_pixels,
                          const ImageInfo* expected = nullptr);

// The same for a PNG or JPEG file's bytes held in memory (a served request's
// image); errors name `name` where decode_image names the file.
DecodedImage decode_image_bytes(const uint8_t* data, size_t size, const std::string& name,
                                int64_t max_pixels);

}  // namespace encgraph::host
