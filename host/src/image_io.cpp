#include "image_io.hpp"

#include <encgraph/error.hpp>

#include <stb/stb_image.h>

#include <cstring>
#include <memory>

namespace encgraph::host {
namespace {

[[noreturn]] void fail(const std::filesystem::path& file, const char* what) {
  const char* reason = stbi_failure_reason();
  throw Error(ErrorKind::Input, "image '" + file.string() + "': " + what + " (" +
                                    (reason ? reason : "unknown reason") + ")");
}

}  // namespace

ImageInfo probe_image(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file))
    throw Error(ErrorKind::Input, "image '" + file.string() + "': no such file");
  int w = 0, h = 0, c = 0;
  if (!stbi_info(file.c_str(), &w, &h, &c)) fail(file, "not a PNG or JPEG image stb can read");
  return {h, w, c};
}

DecodedImage decode_image(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file))
    throw Error(ErrorKind::Input, "image '" + file.string() + "': no such file");
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(stbi_load(file.c_str(), &w, &h, &c, 3),
                                                 stbi_image_free);
  if (!data) fail(file, "cannot be decoded");
  DecodedImage img;
  img.height = h;
  img.width = w;
  img.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  std::memcpy(img.pixels.data(), data.get(), img.pixels.size());
  return img;
}

}  // namespace encgraph::host
