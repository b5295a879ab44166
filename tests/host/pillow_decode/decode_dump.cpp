// Decodes each image named on the command line as `encgraph` does and writes
// <out-dir>/<file name>.rgb: "W H\n" then the RGB bytes, or "ERROR <message>"
// (compare.py compares them with Pillow's).
#include "image_io.hpp"

#include <encgraph/error.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: decode_dump OUT_DIR IMAGE...\n";
    return 2;
  }
  const std::filesystem::path out_dir = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path file = argv[i];
    std::ofstream out(out_dir / (file.filename().string() + ".rgb"), std::ios::binary);
    try {
      const auto img = encgraph::host::decode_image(file, int64_t{1} << 28);
      out << img.width << ' ' << img.height << '\n';
      out.write(reinterpret_cast<const char*>(img.pixels.data()),
                static_cast<std::streamsize>(img.pixels.size()));
    } catch (const encgraph::Error& e) {
      out << "ERROR " << e.what();
    }
  }
  return 0;
}
