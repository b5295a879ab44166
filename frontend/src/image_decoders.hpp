// The pixel decoders behind image_io.cpp: libjpeg-turbo and libpng, set up
// so that the RGB bytes equal Pillow's `Image.open(f).convert("RGB")` (the
// pixels transformers' load_image hands to a processor). Each returns "" on
// success or the library's reason; no exception crosses the C libraries
// (their errors longjmp back into the function that called them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace encgraph::host::detail {

struct Rgb {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // height x width x 3
};

// Baseline or progressive 8-bit JPEG: islow DCT and fancy upsampling (the
// library defaults Pillow keeps), grey replicated, CMYK converted as Pillow's
// cmyk2rgb does (Adobe-inverted data inverted first).
std::string decode_jpeg(const uint8_t* data, size_t size, Rgb& out);

// Every PNG colour type and bit depth as Pillow converts it: 16-bit samples
// keep their high byte, except 16-bit grey (Pillow's mode I), which is clipped
// to 255; alpha and tRNS are dropped, not composited; gAMA is not applied.
std::string decode_png(const uint8_t* data, size_t size, Rgb& out);

// The EXIF orientation (1..8, 1 when absent or unusable) of a TIFF-structured
// EXIF block (after any "Exif\0\0" prefix), as Pillow's getexif reads IFD0.
int exif_orientation(const uint8_t* tiff, size_t size);

// Applies an EXIF orientation as PIL.ImageOps.exif_transpose does.
void apply_orientation(Rgb& img, int orientation);

}  // namespace encgraph::host::detail
