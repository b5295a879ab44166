// siglip_dump: runs the siglip plugin through the Runtime on raw RGB images and
// writes every item's output rows, for comparisons against other
// implementations (scripts/gpu/compare.py --model siglip).
//
//   siglip_dump --device cuda --weights tower.safetensors --out out.bin
//               [--set key=value]... [--budgets 729,2916] [--max-items 8] [--eager]
//               --item image.rgb:HEIGHT:WIDTH ...
//
// An item file holds HEIGHT x WIDTH x 3 bytes. out.bin holds, per item in the
// order given: int64 rows, int64 cols, then rows x cols float32.
#include "../plugin_tool_support.hpp"

#include <encgraph/runtime.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct ImageFile {
  std::string path;
  int64_t height = 0, width = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "siglip_dump: " << why
            << "\nusage: siglip_dump --device cpu|cuda --weights W --out OUT [--set k=v]... "
               "[--budgets a,b] [--max-items N] [--eager] --item FILE:H:W ...\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "siglip";
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;  // compare the path asked for: graphs replay when they fit
  std::string out_path;
  std::vector<ImageFile> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (encgraph::tool::apply_runtime_option(a, value, usage, rc)) continue;
    if (a == "--out") {
      out_path = value();
    } else if (a == "--eager") {
      rc.use_graphs = false;
    } else if (a == "--item") {
      const auto parts = encgraph::tool::split(value(), ':');
      if (parts.size() != 3) usage("--item wants FILE:HEIGHT:WIDTH");
      files.push_back({parts[0], std::stoll(parts[1]), std::stoll(parts[2])});
    } else {
      usage("unknown argument " + a);
    }
  }
  if (out_path.empty() || files.empty()) usage("--out and at least one --item are required");
  try {
    encgraph::Runtime rt(rc);
    if (rc.use_graphs) rt.capture();
    std::vector<std::vector<uint8_t>> pixels;
    std::vector<encgraph::Item> items;
    for (const ImageFile& f : files) {
      pixels.push_back(encgraph::tool::read_bytes(f.path));
      if (static_cast<int64_t>(pixels.back().size()) != f.height * f.width * 3)
        usage(f.path + " does not hold " + std::to_string(f.height) + "x" +
              std::to_string(f.width) + "x3 bytes");
      eg_item_desc d{};
      d.modality = EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = f.height;
      d.width = f.width;
      d.frames = 1;
      d.pixels = pixels.back().data();
      items.push_back(rt.make_item(d));
    }
    const encgraph::Result r = rt.execute(items);
    if (!encgraph::tool::write_item_rows(out_path, r, items.size()))
      usage("cannot write " + out_path);
    const encgraph::Stats st = rt.stats();
    std::printf("siglip_dump: %zu items on %s, graph hits %lld, eager batches %lld\n", items.size(),
                rt.device_name().c_str(), static_cast<long long>(st.graph_hits),
                static_cast<long long>(st.batches_eager));
  } catch (const std::exception& e) {
    std::cerr << "siglip_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
