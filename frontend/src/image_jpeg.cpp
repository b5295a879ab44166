#include "image_decoders.hpp"

// jpeglib.h needs FILE and size_t declared before it.
#include <cstdio>

#include <jpeglib.h>

#include <csetjmp>
#include <cstring>

namespace encgraph::host::detail {
namespace {

// libjpeg-turbo's own fuzzers stop at this many scans: a hostile progressive
// file can repeat scans to make decoding arbitrarily slow.
constexpr int kMaxScans = 500;

struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (corrupt data the library recovers from) are not printed: Pillow
// ignores them too, and decodes what the library gives.
void on_output(j_common_ptr) {}

void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->is_decompressor && d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "a progressive JPEG with more than %d scans",
                  kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

// Pillow's cmyk2rgb: MULDIV255 rounding, then clipped.
uint8_t cmyk_channel(int c, int nk) {
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : v);
}

// Only plain-data locals live across setjmp: a longjmp skips destructors.
// `out` belongs to the caller.
bool run_decoder(const uint8_t* data, size_t size, Rgb& out, ErrorManager& err, int& components,
                 bool& inverted) {
  jpeg_decompress_struct cinfo;
  jpeg_progress_mgr progress;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.output_message = on_output;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  progress.progress_monitor = on_progress;
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  // Pillow reads CMYK data as inverted when an Adobe marker is present.
  inverted = cmyk && cinfo.saw_Adobe_marker;
  cinfo.out_color_space = cmyk                                      ? JCS_CMYK
                          : cinfo.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE
                                                                    : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  components = cinfo.output_components;
  out.width = cinfo.output_width;
  out.height = cinfo.output_height;
  const size_t row = size_t{cinfo.output_width} * static_cast<size_t>(components);
  out.pixels.resize(row * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW line = out.pixels.data() + row * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &line, 1);
  }
  // Not jpeg_finish_decompress: what follows the last scan is not needed.
  jpeg_destroy_decompress(&cinfo);
  return true;
}

}  // namespace

std::string decode_jpeg(const uint8_t* data, size_t size, Rgb& out) {
  ErrorManager err{};
  int components = 0;
  bool inverted = false;
  if (!run_decoder(data, size, out, err, components, inverted)) return err.message;
  const size_t n = static_cast<size_t>(out.width) * static_cast<size_t>(out.height);
  uint8_t* p = out.pixels.data();
  if (components == 1) {
    out.pixels.resize(n * 3);
    p = out.pixels.data();
    for (size_t i = n; i-- > 0;) p[3 * i] = p[3 * i + 1] = p[3 * i + 2] = p[i];
  } else if (components == 4) {
    for (size_t i = 0; i < n; ++i) {
      int c[4];
      for (int k = 0; k < 4; ++k) c[k] = inverted ? 255 - p[4 * i + k] : p[4 * i + k];
      const int nk = 255 - c[3];
      for (int k = 0; k < 3; ++k) p[3 * i + k] = cmyk_channel(c[k], nk);
    }
    out.pixels.resize(n * 3);
  } else if (components != 3) {
    return "the decoder gave " + std::to_string(components) + " colour components";
  }
  return "";
}

}  // namespace encgraph::host::detail
