// Image sniffing and decoding (frontend/src/image_io.cpp): the input is an image
// file, probed as a trace or a file list probes it, then decoded as an item is
// made, under a pixel limit (limits.max_image_pixels) small enough for a
// fuzzing run's memory.
#include "fuzz_support.hpp"
#include "image_io.hpp"

#include <encgraph/error.hpp>

#include <cstdint>

namespace {
constexpr int64_t kMaxPixels = int64_t{1} << 22;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  try {
    const encgraph::host::ImageInfo info = encgraph::host::probe_image(path, kMaxPixels);
    if (info.height <= 0 || info.width <= 0 || info.height * info.width > kMaxPixels)
      __builtin_trap();  // a probe that passes gives a size within the limit
    const encgraph::host::DecodedImage img = encgraph::host::decode_image(path, kMaxPixels, &info);
    if (img.height != info.height || img.width != info.width ||
        img.pixels.size() != static_cast<size_t>(img.height * img.width * img.frames * 3))
      __builtin_trap();
  } catch (const encgraph::Error&) {
  }
  return 0;
}
