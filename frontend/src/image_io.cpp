#include "image_io.hpp"

#include "input_files.hpp"
#include "toml_util.hpp"

#include "image_decoders.hpp"

#include <encgraph/error.hpp>

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace encgraph::host {
namespace {

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& why) {
  throw Error(ErrorKind::Input, "image '" + printable(file.string()) + "' " + why);
}

// An open image file; only a regular file is opened (O_NONBLOCK: a FIFO
// swapped in after the check does not block the open).
struct File {
  std::FILE* f = nullptr;
  explicit File(const std::filesystem::path& path) {
    require_regular_file(path, "image");
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot be opened: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, "is not a regular file: name a PNG or JPEG file");
    }
    f = ::fdopen(fd, "rb");
    if (!f) {
      ::close(fd);
      fail(path, std::string("cannot be opened: ") + std::strerror(errno));
    }
  }
  // Encoded bytes held in memory (a request's image), read through the same
  // parsers as a file; `name` stands for the file in messages.
  File(const uint8_t* data, size_t size, const std::filesystem::path& name) {
    if (size == 0) fail(name, "is empty: send the bytes of a PNG or JPEG file");
    // fmemopen only reads in "rb" mode, so the cast never lets it write.
    f = ::fmemopen(const_cast<uint8_t*>(data), size, "rb");
    if (!f) fail(name, std::string("cannot be read: ") + std::strerror(errno));
  }
  ~File() { std::fclose(f); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Reads exactly n bytes, false at the end of the file.
  bool read(uint8_t* out, size_t n) { return std::fread(out, 1, n, f) == n; }
  bool skip(long n) { return std::fseek(f, n, SEEK_CUR) == 0; }
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t be16(const uint8_t* p) {
  return (uint32_t{p[0]} << 8) | p[1];
}

// The most EXIF data read for its orientation (a JPEG segment holds 64 KiB).
constexpr uint32_t kMaxExif = 1 << 20;

const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

// A known format other than PNG and JPEG by its first bytes, or "".
std::string other_format(const uint8_t* b, size_t n) {
  const auto starts = [&](const char* magic) {
    const size_t m = std::strlen(magic);
    return n >= m && std::memcmp(b, magic, m) == 0;
  };
  if (starts("GIF87a") || starts("GIF89a")) return "a GIF image";
  if (starts("BM")) return "a BMP image";
  if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return "a PNM image (PBM, PGM, PPM)";
  if (starts("8BPS")) return "a Photoshop (PSD) image";
  if (starts("#?RADIANCE") || starts("#?RGBE")) return "an HDR (Radiance) image";
  if (starts("RIFF") && n >= 12 && std::memcmp(b + 8, "WEBP", 4) == 0) return "a WebP image";
  if (n >= 4 && (std::memcmp(b, "II*\0", 4) == 0 || std::memcmp(b, "MM\0*", 4) == 0))
    return "a TIFF image";
  if (n >= 12 && std::memcmp(b + 4, "ftyp", 4) == 0) return "an ISO media file (HEIF, AVIF, MP4)";
  if (starts("\x89PNG")) return "a damaged PNG (its signature is altered)";
  return "";
}

ImageInfo png_header(File& in, const std::filesystem::path& file) {
  // Signature, then IHDR: length 13, "IHDR", width, height, depth, colour
  // type, compression, filter, interlace (PNG 11.2.2), then its CRC.
  uint8_t h[21];
  if (!in.read(h, sizeof(h)))
    fail(file, "is truncated: it ends inside its PNG header (IHDR); the file is damaged");
  if (be32(h) != 13 || std::memcmp(h + 4, "IHDR", 4) != 0)
    fail(file, "is a damaged PNG: its first chunk is not a 13-byte IHDR");
  const uint32_t width = be32(h + 8), height = be32(h + 12);
  const int depth = h[16], type = h[17];
  if (width == 0 || height == 0 || width > 0x7FFFFFFFu || height > 0x7FFFFFFFu)
    fail(file, "is a damaged PNG: its header gives " + std::to_string(width) + "x" +
                   std::to_string(height) + " pixels (each side must be 1 to 2^31-1)");
  const bool depth_ok =
      (type == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
      (type == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
      ((type == 2 || type == 4 || type == 6) && (depth == 8 || depth == 16));
  if (!depth_ok)
    fail(file, "is a damaged PNG: colour type " + std::to_string(type) + " with bit depth " +
                   std::to_string(depth) + " does not exist");
  int32_t channels = type == 0 ? 1 : type == 4 ? 2 : type == 6 ? 4 : 3;
  // The chunks before the image data: a palette with a transparency chunk
  // is stored as RGBA, and eXIf holds the orientation Pillow applies (one
  // after the image data is not read: see docs/config.md).
  int orientation = 1;
  bool exif_seen = false;
  uint8_t chunk[8];
  in.skip(4);  // IHDR's CRC
  while (in.read(chunk, 8)) {
    const uint32_t length = be32(chunk);
    if (std::memcmp(chunk + 4, "IDAT", 4) == 0 || std::memcmp(chunk + 4, "IEND", 4) == 0) break;
    if (type == 3 && std::memcmp(chunk + 4, "tRNS", 4) == 0) channels = 4;
    if (!exif_seen && std::memcmp(chunk + 4, "eXIf", 4) == 0 && length <= kMaxExif) {
      exif_seen = true;
      std::vector<uint8_t> exif(length);
      if (!in.read(exif.data(), exif.size())) break;
      orientation = detail::exif_orientation(exif.data(), exif.size());
      if (!in.skip(4)) break;
    } else if (!in.skip(static_cast<long>(length) + 4)) {
      break;
    }
  }
  return {static_cast<int64_t>(height), static_cast<int64_t>(width), channels, orientation};
}

ImageInfo jpeg_header(File& in, const std::filesystem::path& file) {
  // Segments after SOI (FFD8): a marker (FF xx, fill FFs allowed), then for
  // most a 2-byte length; the frame header (SOFn) holds the geometry.
  const auto truncated = [&]() {
    fail(file, "is truncated: it ends before its JPEG frame header (SOF); the file is damaged");
  };
  // The segments up to the first scan are read: Pillow takes the orientation
  // from the first APP1 "Exif" segment there, before or after the frame header.
  ImageInfo info;
  bool have_frame = false, exif_seen = false;
  const auto ended = [&]() {
    if (have_frame) return;
    truncated();
  };
  uint8_t b[8];
  if (!in.read(b, 2)) truncated();  // FF D8, already sniffed
  while (true) {
    if (!in.read(b, 1)) {
      ended();
      return info;
    }
    if (b[0] != 0xFF) {
      if (have_frame) return info;  // the decoder reports it
      fail(file,
           "is a damaged JPEG: a segment does not start with a marker (0xFF) before the "
           "frame header");
    }
    do {
      if (!in.read(b, 1)) {
        ended();
        return info;
      }
    } while (b[0] == 0xFF);
    const int marker = b[0];
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length
    if (have_frame && (marker == 0xD9 || marker == 0xDA || marker == 0xD8)) return info;
    if (marker == 0xD9 || marker == 0xDA || marker == 0xD8)
      fail(file, "is a damaged JPEG: it has no frame header (SOF) before its image data");
    if (!in.read(b, 2)) {
      ended();
      return info;
    }
    const uint32_t length = be16(b);
    if (length < 2 && have_frame) return info;
    if (length < 2) fail(file, "is a damaged JPEG: a segment has length " + std::to_string(length));
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (marker == 0xE1 && !exif_seen && length >= 7) {
      std::vector<uint8_t> data(length - 2);
      if (!in.read(data.data(), data.size())) {
        ended();
        return info;
      }
      // Pillow keeps the first APP1 starting "Exif\0" (even if unusable).
      if (std::memcmp(data.data(), "Exif\0", 5) == 0) {
        exif_seen = true;
        info.orientation = detail::exif_orientation(data.data(), data.size());
      }
      continue;
    }
    if (!sof || have_frame) {
      if (!in.skip(static_cast<long>(length) - 2)) {
        ended();
        return info;
      }
      continue;
    }
    if (marker > 0xC2)
      fail(file,
           "is a JPEG in a coding the decoder does not support (arithmetic, lossless or "
           "hierarchical, SOF marker 0x" +
               std::string(1, "0123456789ABCDEF"[marker >> 4]) +
               std::string(1, "0123456789ABCDEF"[marker & 15]) +
               "); save it as a baseline or progressive JPEG, or as PNG");
    if (length < 8 || !in.read(b, 6)) truncated();
    const int precision = b[0];
    const uint32_t height = be16(b + 1), width = be16(b + 3);
    const int components = b[5];
    if (precision != 8)
      fail(file, "is a " + std::to_string(precision) +
                     "-bit JPEG; only 8-bit JPEG is supported (save it as 8-bit JPEG or PNG)");
    if (height == 0)
      fail(file,
           "is a JPEG whose height comes after its image data (DNL marker), which the "
           "decoder does not support; re-save it");
    if (width == 0) fail(file, "is a damaged JPEG: its frame header gives a width of 0");
    if (components != 1 && components != 3 && components != 4)
      fail(file, "is a damaged JPEG: its frame header gives " + std::to_string(components) +
                     " colour components (1, 3 or 4 are possible)");
    info.height = height;
    info.width = width;
    info.channels = components == 1 ? 1 : 3;
    have_frame = true;
    if (!in.skip(static_cast<long>(length) - 8)) return info;
  }
}

struct Header {
  ImageInfo info;  // as displayed: the EXIF orientation applied
  int64_t stored_height = 0;
  int64_t stored_width = 0;
  bool jpeg = false;
};

Header read_header(File& in, const std::filesystem::path& file, int64_t max_pixels) {
  uint8_t b[16] = {};
  const size_t n = std::fread(b, 1, sizeof(b), in.f);
  std::rewind(in.f);
  if (n == 0) fail(file, "is empty: name a PNG or JPEG file");
  ImageInfo info;
  bool jpeg = false;
  if (n >= 8 && std::memcmp(b, kPngSignature, 8) == 0) {
    in.skip(8);
    info = png_header(in, file);
  } else if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    info = jpeg_header(in, file);
    jpeg = true;
  } else {
    const std::string other = other_format(b, n);
    fail(file, (other.empty() ? "is not a PNG or JPEG image (its first bytes are neither "
                                "signature)"
                              : "is " + other) +
                   ": only PNG and JPEG are accepted; convert it to PNG");
  }
  // Checked on the header, before any pixel is decoded: a tiny file may claim
  // 100000x100000 pixels (30 GB decoded).
  if (info.height > max_pixels / info.width)
    fail(file, "is too large: " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                   " is over the limit of " + std::to_string(max_pixels) +
                   " pixels (limits.max_image_pixels sets it); shrink the image or raise the "
                   "limit");
  std::rewind(in.f);
  Header header{info, info.height, info.width, jpeg};
  if (info.orientation >= 5) std::swap(header.info.height, header.info.width);
  return header;
}

// Whether a JPEG's data reaches its end-of-image marker. libjpeg decodes a
// JPEG cut short with only a warning (the missing rows grey; Pillow refuses it), so the cut is
// found here: after the first scan header (SOS), where a thumbnail's EOI cannot be, EOI (FF D9)
// must follow; inside scan data FF is always followed by 00 or a restart marker.
bool jpeg_complete(const std::vector<uint8_t>& b) {
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) return false;
    const uint8_t marker = b[i + 1];
    if (marker == 0xFF) {
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      i += 2;
      continue;
    }
    const size_t length = (size_t{b[i + 2]} << 8) | b[i + 3];
    if (marker == 0xDA) {
      for (size_t k = i + 2 + length; k + 1 < b.size(); ++k)
        if (b[k] == 0xFF && b[k + 1] == 0xD9) return true;
      return false;
    }
    i += 2 + length;
  }
  return false;
}

// The bytes a PNG's filtered scanlines take (PNG 7.2, Adam7 passes when
// interlaced), from its IHDR.
uint64_t png_raw_bytes(uint64_t width, uint64_t height, int depth, int type, bool interlaced) {
  const uint64_t samples = type == 0 || type == 3 ? 1 : type == 4 ? 2 : type == 6 ? 4 : 3;
  const uint64_t bits = samples * static_cast<uint64_t>(depth);
  const auto rows = [&](uint64_t w, uint64_t h) {
    return w && h ? h * (1 + (w * bits + 7) / 8) : 0;
  };
  if (!interlaced) return rows(width, height);
  static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                 {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  uint64_t total = 0;
  for (const auto& p : pass) {
    const uint64_t w = width > uint64_t(p[0]) ? (width - p[0] + p[2] - 1) / p[2] : 0;
    const uint64_t h = height > uint64_t(p[1]) ? (height - p[1] + p[3] - 1) / p[3] : 0;
    total += rows(w, h);
  }
  return total;
}

// A few MB of zeros behind a 28x28 header would cost seconds of inflating
// (and, in decoders that grow their buffer, GBs). The data is inflated here
// first, up to the size the header allows (only when it could inflate past
// that at all: zlib expands at most 1032-fold).
void check_png_inflated_size(const std::vector<uint8_t>& b, const std::filesystem::path& file) {
  if (b.size() < 33) return;  // the decoder reports a short file
  const uint64_t raw = png_raw_bytes(be32(&b[16]), be32(&b[20]), b[24], b[25], b[28] != 0);
  std::vector<uint8_t> idat;
  // Every chunk whose length and type are there is checked, also one whose
  // data or CRC the file cuts short.
  for (size_t at = 8; at + 8 <= b.size();) {
    const uint64_t length = be32(&b[at]);
    if (std::memcmp(&b[at + 4], "IEND", 4) == 0) break;  // what follows is not read
    // Named here, with the chunk and its claimed length.
    const uint64_t left = b.size() - at - 8;  // after the length and type
    if (length + 4 > left) {
      std::string type;
      for (int i = 4; i < 8; ++i) {
        const char c = static_cast<char>(b[at + i]);
        type += std::isalpha(static_cast<unsigned char>(c)) ? c : '?';
      }
      fail(file, "cannot be decoded (its " + type + " chunk at byte " + std::to_string(at) +
                     " claims " + std::to_string(length) + " bytes of data and a 4-byte CRC but " +
                     std::to_string(left) + " bytes follow); the file is damaged or truncated");
    }
    if (std::memcmp(&b[at + 4], "IDAT", 4) == 0)
      idat.insert(idat.end(), b.begin() + static_cast<std::ptrdiff_t>(at + 8),
                  b.begin() + static_cast<std::ptrdiff_t>(at + 8 + length));
    at += 12 + length;
  }
  // Some slack for encoders that write a little too much.
  const uint64_t allowed = raw + raw / 8 + 1024;
  if (idat.empty() || idat.size() * uint64_t{1032} <= allowed ||
      idat.size() > std::numeric_limits<uInt>::max())
    return;
  // Inflated through a small buffer, counting: nothing of the claimed size
  // is allocated. A data error is left to the decoder, which names it.
  z_stream zs{};
  if (inflateInit(&zs) != Z_OK) return;
  zs.next_in = reinterpret_cast<Bytef*>(idat.data());
  zs.avail_in = static_cast<uInt>(idat.size());
  std::vector<Bytef> scratch(1 << 16);
  uint64_t total = 0;
  int ret = Z_OK;
  while (ret == Z_OK && total <= allowed) {
    zs.next_out = scratch.data();
    zs.avail_out = static_cast<uInt>(scratch.size());
    ret = inflate(&zs, Z_NO_FLUSH);
    total += scratch.size() - zs.avail_out;
    if (ret == Z_OK && zs.avail_out != 0 && zs.avail_in == 0) break;  // all input used
  }
  inflateEnd(&zs);
  if (total > allowed)
    fail(file, "is a damaged PNG: its " + std::to_string(idat.size()) +
                   " bytes of compressed image data inflate to more than the " +
                   std::to_string(raw) + " bytes its header's " + std::to_string(be32(&b[16])) +
                   "x" + std::to_string(be32(&b[20])) +
                   " pixels need (a decompression bomb?); re-save the image");
}

std::string size_text(int64_t width, int64_t height) {
  return std::to_string(width) + "x" + std::to_string(height);
}

}  // namespace

ImageInfo probe_image(const std::filesystem::path& file, int64_t max_pixels) {
  File in(file);
  return read_header(in, file, max_pixels).info;
}

namespace {

DecodedImage decode_open(File& in, const std::filesystem::path& file, int64_t max_pixels,
                         const ImageInfo* expected) {
  const Header header = read_header(in, file, max_pixels);
  const ImageInfo& info = header.info;
  if (expected && (info.height != expected->height || info.width != expected->width))
    fail(file, "is now " + size_text(info.width, info.height) + " but was " +
                   size_text(expected->width, expected->height) +
                   " when the workload was read: the file changed during the run");
  std::vector<uint8_t> bytes;
  {
    std::fseek(in.f, 0, SEEK_END);
    const long size = std::ftell(in.f);
    std::rewind(in.f);
    if (size < 0 || size > std::numeric_limits<int>::max())
      fail(file, "is over 2 GiB, more than the decoder reads; re-save it smaller");
    bytes.resize(static_cast<size_t>(size));
    if (!in.read(bytes.data(), bytes.size()))
      fail(file, "cannot be read: it shrank while being read");
  }
  if (header.jpeg && !jpeg_complete(bytes))
    fail(file,
         "is truncated: its JPEG data ends before the end-of-image marker; the file is "
         "damaged");
  if (!header.jpeg) check_png_inflated_size(bytes, file);
  detail::Rgb rgb;
  std::string reason;
  try {
    reason = header.jpeg ? detail::decode_jpeg(bytes.data(), bytes.size(), rgb)
                         : detail::decode_png(bytes.data(), bytes.size(), rgb);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::Device, "image '" + printable(file.string()) + "' (" +
                                       size_text(info.width, info.height) +
                                       ") cannot be decoded: out of memory; free memory or lower "
                                       "limits.max_image_pixels");
  }
  if (!reason.empty())
    fail(file, "cannot be decoded (" + reason + "); the file is damaged or truncated");
  if (rgb.height != header.stored_height || rgb.width != header.stored_width)
    fail(file, "decoded to " + size_text(rgb.width, rgb.height) + " pixels but its header says " +
                   size_text(header.stored_width, header.stored_height) + "; the file is damaged");
  detail::apply_orientation(rgb, info.orientation);
  DecodedImage img;
  img.height = rgb.height;
  img.width = rgb.width;
  img.pixels = std::move(rgb.pixels);
  return img;
}

}  // namespace

DecodedImage decode_image(const std::filesystem::path& file, int64_t max_pixels,
                          const ImageInfo* expected) {
  File in(file);
  return decode_open(in, file, max_pixels, expected);
}

DecodedImage decode_image_bytes(const uint8_t* data, size_t size, const std::string& name,
                                int64_t max_pixels) {
  File in(data, size, name);
  return decode_open(in, name, max_pixels, nullptr);
}

}  // namespace encgraph::host
