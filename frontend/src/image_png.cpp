#include "image_decoders.hpp"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace encgraph::host::detail {
namespace {

struct Source {
  const uint8_t* data;
  size_t size;
  size_t at;
  char message[256];
};

void on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<Source*>(png_get_io_ptr(png));
  if (n > src->size - src->at) png_error(png, "the file ends inside a chunk");
  std::memcpy(out, src->data + src->at, n);
  src->at += n;
}

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* src = static_cast<Source*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof(src->message), "%s", message);
  png_longjmp(png, 1);
}

// Pillow decodes through benign problems (an ancillary chunk's CRC, extra
// data) without a word, and so does this.
void on_warning(png_structp, png_const_charp) {}

// What the caller needs after decoding, besides the rows.
struct Layout {
  int channels = 0;
  int depth = 0;
  int type = 0;
};

// Only plain-data locals live across setjmp: a longjmp skips destructors.
// `raw` and `rows` belong to the caller.
bool run_decoder(Source& src, Rgb& out, std::vector<uint8_t>& raw, std::vector<png_bytep>& rows,
                 Layout& layout) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
  if (!png) {
    std::snprintf(src.message, sizeof(src.message), "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(src.message, sizeof(src.message), "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  // The size limit is limits.max_image_pixels, checked on the header first.
  png_set_user_limits(png, 0x7FFFFFFF, 0x7FFFFFFF);
  png_set_read_fn(png, &src, on_read);
  png_read_info(png, info);
  layout.type = png_get_color_type(png, info);
  if (layout.type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (layout.type == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout.channels = png_get_channels(png, info);
  layout.depth = png_get_bit_depth(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  const size_t row = png_get_rowbytes(png, info);
  raw.resize(row * static_cast<size_t>(out.height));
  rows.resize(static_cast<size_t>(out.height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = raw.data() + y * row;
  png_read_image(png, rows.data());
  // Not png_read_end: chunks after the image data do not change the pixels.
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

std::string decode_png(const uint8_t* data, size_t size, Rgb& out) {
  Source src{data, size, 0, {}};
  std::vector<uint8_t> raw;
  std::vector<png_bytep> rows;
  Layout layout;
  if (!run_decoder(src, out, raw, rows, layout)) return src.message;
  const int ch = layout.channels;
  if (ch < 1 || ch > 4 || (layout.depth != 8 && layout.depth != 16))
    return "the decoder gave " + std::to_string(ch) + " channels of " +
           std::to_string(layout.depth) + " bits";
  const size_t n = static_cast<size_t>(out.width) * static_cast<size_t>(out.height);
  const size_t bytes = static_cast<size_t>(layout.depth / 8);
  // Pillow opens 16-bit grey as mode I and clips it to 0..255 on conversion;
  // every other 16-bit sample keeps its high byte (big-endian: the first).
  const bool clip16 = layout.depth == 16 && layout.type == PNG_COLOR_TYPE_GRAY;
  out.pixels.resize(n * 3);
  const int colour = ch >= 3 ? 3 : 1;  // grey(+alpha) or RGB(A); alpha is dropped
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* px = raw.data() + i * static_cast<size_t>(ch) * bytes;
    for (int k = 0; k < 3; ++k) {
      const uint8_t* s = px + static_cast<size_t>(colour == 3 ? k : 0) * bytes;
      uint8_t v = s[0];
      if (clip16) v = s[0] ? 255 : s[1];
      out.pixels[3 * i + static_cast<size_t>(k)] = v;
    }
  }
  return "";
}

}  // namespace encgraph::host::detail
