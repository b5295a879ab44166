// EXIF orientation, read and applied as Pillow does for transformers'
// load_image (PIL.ImageOps.exif_transpose before convert("RGB")).
#include "image_decoders.hpp"

#include <cstring>
#include <utility>

namespace encgraph::host::detail {

int exif_orientation(const uint8_t* t, size_t n) {
  if (n >= 6 && std::memcmp(t, "Exif\0\0", 6) == 0) {
    t += 6;
    n -= 6;
  }
  if (n < 8) return 1;
  bool little;
  if (std::memcmp(t, "II*\0", 4) == 0)
    little = true;
  else if (std::memcmp(t, "MM\0*", 4) == 0)
    little = false;
  else
    return 1;
  const auto u16 = [&](size_t at) -> uint32_t {
    return little ? t[at] | (uint32_t{t[at + 1]} << 8) : (uint32_t{t[at]} << 8) | t[at + 1];
  };
  const auto u32 = [&](size_t at) -> uint32_t {
    return little ? u16(at) | (u16(at + 2) << 16) : (u16(at) << 16) | u16(at + 2);
  };
  const uint32_t ifd = u32(4);
  if (ifd > n - 2) return 1;
  const uint32_t count = u16(ifd);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = size_t{ifd} + 2 + size_t{i} * 12;
    if (at + 12 > n) return 1;
    if (u16(at) != 0x0112) continue;
    // One SHORT (or LONG) value, stored in the entry itself.
    const uint32_t type = u16(at + 2), values = u32(at + 4);
    if (values != 1 || (type != 3 && type != 4)) return 1;
    const uint32_t v = type == 3 ? u16(at + 8) : u32(at + 8);
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

void apply_orientation(Rgb& img, int orientation) {
  if (orientation < 2 || orientation > 8) return;
  const size_t w = static_cast<size_t>(img.width), h = static_cast<size_t>(img.height);
  const bool swap = orientation >= 5;
  const size_t ow = swap ? h : w, oh = swap ? w : h;
  std::vector<uint8_t> out(img.pixels.size());
  for (size_t y = 0; y < oh; ++y) {
    for (size_t x = 0; x < ow; ++x) {
      size_t sx = x, sy = y;  // the source pixel of output (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                  // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;  // ROTATE_180
        case 4: sy = h - 1 - y; break;                  // FLIP_TOP_BOTTOM
        case 5: sx = y, sy = x; break;                  // TRANSPOSE
        case 6: sx = y, sy = h - 1 - x; break;          // ROTATE_270
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;  // TRANSVERSE
        case 8: sx = w - 1 - y, sy = x; break;          // ROTATE_90
      }
      std::memcpy(&out[(y * ow + x) * 3], &img.pixels[(sy * w + sx) * 3], 3);
    }
  }
  img.pixels = std::move(out);
  img.width = static_cast<int64_t>(ow);
  img.height = static_cast<int64_t>(oh);
}

}  // namespace encgraph::host::detail
