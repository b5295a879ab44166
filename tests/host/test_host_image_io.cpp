// Image files: PNG and JPEG recognised by their signature, other formats
// refused by name, header geometry and channels read here, the size limit
// applied before decoding, and the decoder's own reason kept on failure.
#include "host_test_support.hpp"
#include "image_io.hpp"
#include "test_images.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

using namespace encgraph::host;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kLimit = 178956970;

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string probe_error(const fs::path& p, int64_t limit = kLimit) {
  try {
    probe_image(p, limit);
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Input);
    return e.what();
  }
  return "";
}

std::string decode_error(const fs::path& p) {
  try {
    decode_image(p, kLimit);
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Input);
    return e.what();
  }
  return "";
}

// A PNG with only a signature and an IHDR chunk (no pixel data).
std::string png_header(uint32_t w, uint32_t h, int depth = 8, int type = 2) {
  std::string s = "\x89PNG\r\n\x1a\n";
  const auto be = [&](uint32_t v) {
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  be(13);
  s += "IHDR";
  be(w);
  be(h);
  s.push_back(static_cast<char>(depth));
  s.push_back(static_cast<char>(type));
  s.append(3, '\0');
  be(0);  // CRC, not checked by the probe
  return s;
}

}  // namespace

TEST_CASE("PNG and JPEG headers give the geometry and the stored channels") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 30, 20);
  host_test::write_gradient(dir / "b.jpg", 17, 9, 0, true);
  ImageInfo png = probe_image(dir / "a.png", kLimit);
  CHECK(png.width == 30);
  CHECK(png.height == 20);
  CHECK(png.channels == 3);
  ImageInfo jpg = probe_image(dir / "b.jpg", kLimit);
  CHECK(jpg.width == 17);
  CHECK(jpg.height == 9);
  CHECK(jpg.channels == 3);
  std::ofstream(dir / "grey.png", std::ios::binary) << png_header(5, 4, 8, 0);
  CHECK(probe_image(dir / "grey.png", kLimit).channels == 1);
  std::ofstream(dir / "ga.png", std::ios::binary) << png_header(5, 4, 8, 4);
  CHECK(probe_image(dir / "ga.png", kLimit).channels == 2);
  std::ofstream(dir / "rgba.png", std::ios::binary) << png_header(5, 4, 16, 6);
  CHECK(probe_image(dir / "rgba.png", kLimit).channels == 4);
  // A palette decodes to RGB, or to RGBA with a transparency chunk.
  std::ofstream(dir / "pal.png", std::ios::binary)
      << png_header(5, 4, 8, 3) + std::string("\0\0\0\x03PLTEabc\0\0\0\0", 15);
  CHECK(probe_image(dir / "pal.png", kLimit).channels == 3);
  std::ofstream(dir / "palt.png", std::ios::binary)
      << png_header(5, 4, 8, 3) +
             std::string("\0\0\0\x03PLTEabc\0\0\0\0\0\0\0\x01tRNSx\0\0\0\0", 28);
  CHECK(probe_image(dir / "palt.png", kLimit).channels == 4);

  const DecodedImage img = decode_image(dir / "a.png", kLimit);
  CHECK(img.width == 30);
  CHECK(img.height == 20);
  CHECK(img.pixels.size() == 30 * 20 * 3);
}

TEST_CASE("formats other than PNG and JPEG are refused by name") {
  host_test::TempDir dir;
  struct Case {
    std::string name, bytes, expect;
  };
  const std::vector<Case> cases = {
      {"x.gif", std::string("GIF89a\x01\0\x01\0\0\0\0", 13), "is a GIF image"},
      {"x.bmp", "BM" + std::string(60, '\0'), "is a BMP image"},
      {"x.pgm", "P5\n2 2\n255\n\0\0\0\0", "is a PNM image (PBM, PGM, PPM)"},
      {"x.psd", "8BPS" + std::string(30, '\0'), "is a Photoshop (PSD) image"},
      {"x.hdr", "#?RADIANCE\n", "is an HDR (Radiance) image"},
      {"x.webp", std::string("RIFF\0\0\0\0WEBPVP8 ", 16), "is a WebP image"},
      {"x.tif", std::string("II*\0\0\0\0\0", 8), "is a TIFF image"},
      {"x.txt", "just some text", "is not a PNG or JPEG image"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::ofstream(dir / c.name, std::ios::binary) << c.bytes;
    const std::string e = probe_error(dir / c.name);
    CHECK(e.find("image '" + (dir / c.name).string() + "' " + c.expect) == 0);
    CHECK(e.find("only PNG and JPEG are accepted") != std::string::npos);
    CHECK(decode_error(dir / c.name) == e);
  }
  std::ofstream(dir / "empty.png") << "";
  CHECK(probe_error(dir / "empty.png").find("is empty") != std::string::npos);
}

TEST_CASE("damaged headers say what is wrong; damaged pixel data keeps the decoder's reason") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 64, 64);
  host_test::write_gradient(dir / "b.jpg", 64, 64, 0, true);
  const std::string png = bytes_of(dir / "a.png"), jpg = bytes_of(dir / "b.jpg");

  std::ofstream(dir / "cut-header.png", std::ios::binary) << png.substr(0, 20);
  CHECK(probe_error(dir / "cut-header.png").find("is truncated: it ends inside its PNG header") !=
        std::string::npos);
  std::ofstream(dir / "cut-data.png", std::ios::binary) << png.substr(0, png.size() / 2);
  CHECK(probe_error(dir / "cut-data.png").empty());  // the header is whole
  const std::string png_reason = decode_error(dir / "cut-data.png");
  CHECK(png_reason.find("cannot be decoded (") != std::string::npos);

  std::ofstream(dir / "cut-header.jpg", std::ios::binary) << jpg.substr(0, 30);
  CHECK(probe_error(dir / "cut-header.jpg").find("ends before its JPEG frame header") !=
        std::string::npos);
  std::ofstream(dir / "cut-data.jpg", std::ios::binary) << jpg.substr(0, jpg.size() / 2);
  CHECK(probe_error(dir / "cut-data.jpg").empty());
  // Cut short, not "bad png sig" (the reason stb's format probing left).
  CHECK(decode_error(dir / "cut-data.jpg")
            .find("is truncated: its JPEG data ends before the "
                  "end-of-image marker") != std::string::npos);
  CHECK(decode_image(dir / "b.jpg", kLimit).width == 64);

  std::ofstream(dir / "bad-type.png", std::ios::binary) << png_header(4, 4, 3, 2);
  CHECK(probe_error(dir / "bad-type.png").find("colour type 2 with bit depth 3 does not exist") !=
        std::string::npos);
  std::ofstream(dir / "zero.png", std::ios::binary) << png_header(0, 4);
  CHECK(probe_error(dir / "zero.png").find("gives 0x4 pixels") != std::string::npos);
  std::string arith = jpg;
  const size_t sof = arith.find("\xff\xc0");
  REQUIRE(sof != std::string::npos);
  arith[sof + 1] = '\xc9';
  std::ofstream(dir / "arith.jpg", std::ios::binary) << arith;
  CHECK(probe_error(dir / "arith.jpg").find("arithmetic, lossless or hierarchical") !=
        std::string::npos);
}

TEST_CASE("the pixel limit is applied to the header, before decoding") {
  host_test::TempDir dir;
  std::ofstream(dir / "huge.png", std::ios::binary) << png_header(100000, 100000);
  const std::string e = probe_error(dir / "huge.png");
  CHECK(e.find("is too large: 100000x100000 is over the limit of 178956970 pixels "
               "(limits.max_image_pixels") != std::string::npos);
  CHECK(decode_error(dir / "huge.png") == e);
  host_test::write_gradient(dir / "a.png", 30, 20);
  CHECK(probe_error(dir / "a.png", 599).find("30x20 is over the limit of 599 pixels") !=
        std::string::npos);
  CHECK(probe_error(dir / "a.png", 600).empty());
  // A file that changed since it was probed.
  const ImageInfo was{20, 31, 3};
  CHECK_THROWS_WITH_AS(decode_image(dir / "a.png", kLimit, &was),
                       doctest::Contains("is now 30x20 but was 31x20"), encgraph::Error);
}

TEST_CASE("only regular files are opened: a FIFO does not block, a folder is named") {
  host_test::TempDir dir;
  REQUIRE(::mkfifo((dir / "f.png").c_str(), 0600) == 0);
  CHECK(probe_error(dir / "f.png").find("is a FIFO (named pipe), not a regular file") !=
        std::string::npos);
  CHECK(decode_error(dir / "f.png").find("is a FIFO") != std::string::npos);
  fs::create_directories(dir / "d.png");
  CHECK(probe_error(dir / "d.png").find("is a directory, not a regular file: name an image file") !=
        std::string::npos);
  CHECK(probe_error("/dev/zero").find("is a character device") != std::string::npos);
  CHECK(probe_error(dir / "none.png").find("does not exist") != std::string::npos);
}

// Debian's libstb exports stb_image_write's zlib compressor without
// declaring it in a header.
extern "C" unsigned char* stbi_zlib_compress(unsigned char* data, int data_len, int* out_len,
                                             int quality);

namespace {

// The CRC libpng checks on a chunk starting at `at` (its length field).
void fix_crc(std::string& s, size_t at) {
  const size_t length = (size_t{static_cast<unsigned char>(s[at])} << 24) |
                        (size_t{static_cast<unsigned char>(s[at + 1])} << 16) |
                        (size_t{static_cast<unsigned char>(s[at + 2])} << 8) |
                        static_cast<unsigned char>(s[at + 3]);
  const uLong crc =
      crc32(0, reinterpret_cast<const Bytef*>(s.data() + at + 4), static_cast<uInt>(length + 4));
  for (int i = 0; i < 4; ++i)
    s[at + 8 + length + static_cast<size_t>(i)] = static_cast<char>((crc >> (24 - 8 * i)) & 0xFF);
}

// A PNG of `w` x `h` pixels (RGB, or grey: colour type `type`) whose image
// data is `raw` compressed, with correct CRCs.
std::string png_with_data(uint32_t w, uint32_t h, const std::vector<unsigned char>& raw,
                          bool interlaced = false, int type = 2) {
  std::string s = png_header(w, h, 8, type);
  if (interlaced) s[8 + 8 + 12] = 1;
  fix_crc(s, 8);
  const size_t idat = s.size();
  int n = 0;
  unsigned char* z = stbi_zlib_compress(const_cast<unsigned char*>(raw.data()),
                                        static_cast<int>(raw.size()), &n, 8);
  REQUIRE(z);
  const auto be = [&](uint32_t v) {
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  be(static_cast<uint32_t>(n));
  s += "IDAT";
  s.append(reinterpret_cast<const char*>(z), static_cast<size_t>(n));
  be(0);
  std::free(z);
  fix_crc(s, idat);
  const size_t iend = s.size();
  be(0);
  s += "IEND";
  be(0);
  fix_crc(s, iend);
  return s;
}

}  // namespace

TEST_CASE("a PNG whose data inflates far past its header's size is refused before decoding") {
  host_test::TempDir dir;
  // 28x28 RGB needs 28 * (1 + 84) bytes; 8 MiB of zeros compress to a few KB.
  std::ofstream(dir / "bomb.png", std::ios::binary)
      << png_with_data(28, 28, std::vector<unsigned char>(8 << 20));
  CHECK(probe_error(dir / "bomb.png").empty());  // the header is fine
  CHECK(decode_error(dir / "bomb.png").find("is a damaged PNG: its ") != std::string::npos);
  CHECK(decode_error(dir / "bomb.png")
            .find("inflate to more than the 2380 bytes its header's 28x28 pixels need") !=
        std::string::npos);
  // Flat images compress as well, and must still decode: exactly the bytes
  // the header asks for, plain and interlaced (7 passes, a filter byte a row).
  std::ofstream(dir / "flat.png", std::ios::binary)
      << png_with_data(512, 512, std::vector<unsigned char>(512 * (1 + 512 * 3)));
  CHECK(decode_image(dir / "flat.png", kLimit).width == 512);
  size_t interlaced = 0;
  const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                          {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  for (const auto& p : pass) {
    const size_t w = (513 - p[0] + p[2] - 1) / p[2], h = (511 - p[1] + p[3] - 1) / p[3];
    interlaced += h * (1 + w * 3);
  }
  std::ofstream(dir / "flat-interlaced.png", std::ios::binary)
      << png_with_data(513, 511, std::vector<unsigned char>(interlaced), true);
  CHECK(decode_image(dir / "flat-interlaced.png", kLimit).height == 511);
}

TEST_CASE("a long side is no problem for the decoder: only limits.max_image_pixels bounds it") {
  host_test::TempDir dir;
  // 2^24 + 1 grey pixels in one row (over libpng's default side limit).
  const uint32_t wide = (1u << 24) + 1;
  std::vector<unsigned char> raw(1 + size_t{wide});
  raw[1 + 5] = 200;
  std::ofstream(dir / "wide.png", std::ios::binary)
      << png_with_data(wide, 1, raw, false, /*type=*/0);
  const DecodedImage img = decode_image(dir / "wide.png", kLimit);
  CHECK(img.width == wide);
  CHECK(img.height == 1);
  REQUIRE(img.pixels.size() == size_t{wide} * 3);
  CHECK(img.pixels[15] == 200);  // grey becomes R = G = B
  CHECK(img.pixels[17] == 200);
  CHECK(img.pixels[18] == 0);
}

namespace {

// A TIFF-structured EXIF block whose IFD0 holds only an orientation.
std::string exif_block(int orientation, bool little) {
  std::string t = little ? std::string("II*\0\x08\0\0\0", 8) : std::string("MM\0*\0\0\0\x08", 8);
  const auto u16 = [&](unsigned v) {
    const char a = static_cast<char>(v & 0xFF), b = static_cast<char>(v >> 8);
    t += little ? std::string{a, b} : std::string{b, a};
  };
  u16(1);       // one entry
  u16(0x0112);  // Orientation
  u16(3);       // SHORT
  // The count (a LONG), then the value left-aligned in its 4 bytes.
  if (little)
    u16(1), u16(0), u16(static_cast<unsigned>(orientation)), u16(0);
  else
    u16(0), u16(1), u16(static_cast<unsigned>(orientation)), u16(0);
  t.append(4, '\0');  // no next IFD
  return t;
}

}  // namespace

TEST_CASE("the EXIF orientation is applied as Pillow's exif_transpose applies it") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "plain.jpg", 16, 8, 0, true);
  const std::string jpg = bytes_of(dir / "plain.jpg");
  const DecodedImage plain = decode_image(dir / "plain.jpg", kLimit);
  const auto px = [](const DecodedImage& img, int64_t x, int64_t y) {
    const size_t at = static_cast<size_t>((y * img.width + x) * 3);
    return std::vector<uint8_t>(img.pixels.begin() + static_cast<std::ptrdiff_t>(at),
                                img.pixels.begin() + static_cast<std::ptrdiff_t>(at + 3));
  };
  for (const bool little : {true, false}) {
    CAPTURE(little);
    // An APP1 segment right after SOI.
    const std::string exif = "Exif" + std::string(2, '\0') + exif_block(6, little);
    std::string rotated = jpg.substr(0, 2) + "\xff\xe1";
    rotated += static_cast<char>((exif.size() + 2) >> 8);
    rotated += static_cast<char>((exif.size() + 2) & 0xFF);
    rotated += exif + jpg.substr(2);
    std::ofstream(dir / "r6.jpg", std::ios::binary) << rotated;
    const ImageInfo info = probe_image(dir / "r6.jpg", kLimit);
    CHECK(info.orientation == 6);
    CHECK(info.width == 8);  // the sides as displayed
    CHECK(info.height == 16);
    const DecodedImage img = decode_image(dir / "r6.jpg", kLimit, &info);
    REQUIRE(img.width == 8);
    REQUIRE(img.height == 16);
    // Rotated 90 degrees clockwise: the top-left pixel was the bottom-left.
    CHECK(px(img, 0, 0) == px(plain, 0, 7));
    CHECK(px(img, 7, 0) == px(plain, 0, 0));
    CHECK(px(img, 7, 15) == px(plain, 15, 0));
  }
  // A PNG's eXIf chunk, before the image data.
  host_test::write_gradient(dir / "plain.png", 6, 4);
  std::string png = bytes_of(dir / "plain.png");
  const std::string block = exif_block(3, true);
  std::string chunk;
  for (int i = 3; i >= 0; --i) chunk += static_cast<char>((block.size() >> (8 * i)) & 0xFF);
  chunk += "eXIf" + block + std::string(4, '\0');
  png.insert(8 + 25, chunk);
  fix_crc(png, 8 + 25);
  std::ofstream(dir / "r3.png", std::ios::binary) << png;
  const DecodedImage p = decode_image(dir / "plain.png", kLimit);
  const DecodedImage r = decode_image(dir / "r3.png", kLimit);
  REQUIRE(r.width == 6);
  CHECK(px(r, 0, 0) == px(p, 5, 3));
  CHECK(px(r, 5, 3) == px(p, 0, 0));
  // An orientation out of range changes nothing.
  std::string odd = png;
  odd[8 + 25 + 8 + 18] = 9;
  fix_crc(odd, 8 + 25);
  std::ofstream(dir / "r9.png", std::ios::binary) << odd;
  CHECK(decode_image(dir / "r9.png", kLimit).pixels == p.pixels);
}

TEST_CASE("bytes held in memory decode as their file does, errors naming the given label") {
  host_test::TempDir dir;
  host_test::write_gradient(dir / "a.png", 30, 20);
  host_test::write_gradient(dir / "b.jpg", 17, 9, 3, true);
  for (const char* name : {"a.png", "b.jpg"}) {
    CAPTURE(name);
    const std::string bytes = bytes_of(dir / name);
    const DecodedImage from_file = decode_image(dir / name, kLimit);
    const DecodedImage from_memory = decode_image_bytes(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "images[0]", kLimit);
    CHECK(from_memory.width == from_file.width);
    CHECK(from_memory.height == from_file.height);
    CHECK(from_memory.pixels == from_file.pixels);
  }
  const std::string png = bytes_of(dir / "a.png");
  const auto error = [](const std::string& bytes, int64_t limit) {
    try {
      decode_image_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "images[2]",
                         limit);
    } catch (const encgraph::Error& e) {
      CHECK(e.kind() == encgraph::ErrorKind::Input);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(png.substr(0, png.size() / 2), kLimit).find("image 'images[2]'") == 0);
  CHECK(error("", kLimit).find("is empty") != std::string::npos);
  CHECK(error("GIF89a......", kLimit).find("a GIF image") != std::string::npos);
  CHECK(error(png, 100).find("over the limit of 100 pixels") != std::string::npos);
}
