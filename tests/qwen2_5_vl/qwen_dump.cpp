// qwen_dump: runs the qwen2_5_vl plugin through the Runtime on raw RGB frames and
// writes every item's output rows, for comparisons against other
// implementations (scripts/gpu/compare.py --model qwen2_5_vl).
//
//   qwen_dump --device cuda --weights tower.safetensors --out out.bin
//             [--set key=value]... [--budgets 256,1024] [--max-items 8] [--eager]
//             --item frames.rgb:FRAMES:HEIGHT:WIDTH ...
//
// An item file holds FRAMES x HEIGHT x WIDTH x 3 bytes. out.bin holds, per item
// in the order given: int64 rows, int64 cols, then rows x cols float32.
#include "../plugin_tool_support.hpp"

#include <encgraph/runtime.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct ItemFile {
  std::string path;
  int64_t frames = 1, height = 0, width = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "qwen_dump: " << why
            << "\nusage: qwen_dump --device cpu|cuda --weights W --out OUT [--set k=v]... "
               "[--budgets a,b] [--max-items N] [--eager] --item FILE:FRAMES:H:W ...\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "qwen2_5_vl";
  rc.stats_log_interval = 0;
  std::string out_path;
  std::vector<ItemFile> files;
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
      if (parts.size() != 4) usage("--item wants FILE:FRAMES:HEIGHT:WIDTH");
      files.push_back({parts[0], std::stoll(parts[1]), std::stoll(parts[2]), std::stoll(parts[3])});
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
    for (const ItemFile& f : files) {
      pixels.push_back(encgraph::tool::read_bytes(f.path));
      if (static_cast<int64_t>(pixels.back().size()) != f.frames * f.height * f.width * 3)
        usage(f.path + " does not hold " + std::to_string(f.frames) + "x" +
              std::to_string(f.height) + "x" + std::to_string(f.width) + "x3 bytes");
      eg_item_desc d{};
      d.modality = f.frames > 1 ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = f.height;
      d.width = f.width;
      d.frames = f.frames;
      d.pixels = pixels.back().data();
      items.push_back(rt.make_item(d));
    }
    const encgraph::Result r = rt.execute(items);
    encgraph::tool::write_item_rows(out_path, r, items.size());
    const encgraph::Stats st = rt.stats();
    std::printf("qwen_dump: %zu items on %s, graph hits %lld, eager batches %lld\n", items.size(),
                rt.device_name().c_str(), static_cast<long long>(st.graph_hits),
                static_cast<long long>(st.batches_eager));
  } catch (const std::exception& e) {
    std::cerr << "qwen_dump: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
