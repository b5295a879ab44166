// The out-of-tree examples (examples/minimal_plugin, examples/two_path_plugin),
// built on the SDK by the loader_example_build fixture against an installed
// copy of this build (and the minimal one against the build tree too): they
// must load, capture and run on the CPU with memory poisoned, and match a
// reference computed here from the pixels.
#include "../abi_compat/patch_means_reference.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using patch_means::Image;

namespace {

const fs::path kBuild = EXAMPLE_BUILD_DIR;
const fs::path kPrefix = EXAMPLE_PREFIX;
const fs::path kTwoPathBuild = kBuild.parent_path() / "build-two_path";
const fs::path kTreeBuild = kBuild.parent_path() / "build-from-tree";
const fs::path kPluginFile = kBuild / "libencgraph_minimal.so";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

encgraph::RuntimeConfig cpu_config(const std::string& plugin, const fs::path& dir) {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = plugin;
  cfg.plugin_dirs = {dir};
  cfg.device = "cpu";
  cfg.plugin_config = {{"scale", "2"}};
  cfg.poison_memory = true;  // outputs, buffers and workspace start as NaN
  cfg.prefer_faster_path = false;
  return cfg;
}

eg_item_desc desc(const Image& im) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = im.height;
  d.width = im.width;
  d.frames = 1;
  d.pixels = im.pixels.data();
  return d;
}

std::string error_of(const encgraph::RuntimeConfig& cfg) {
  try {
    encgraph::Runtime runtime(cfg);
  } catch (const encgraph::Error& e) {
    return e.what();
  }
  return "";
}

void check_rows(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    CAPTURE(k);
    REQUIRE(got[k] == doctest::Approx(want[k]).epsilon(1e-5));
  }
}

// two_path's reference: the global 8x8 view's four 4x4 patches, then the
// tile x tile tiles (edge pixels repeated), each row [channel means * scale,
// position]; pooled: the mean of the two paths' per-token means.
struct TwoPathRef {
  std::vector<double> tokens;
  std::vector<double> pooled;
};

TwoPathRef two_path_reference(const Image& im, double scale, int64_t tile) {
  const int64_t h = im.height, w = im.width;
  auto px = [&](int64_t y, int64_t x, int c) {
    return im.pixels[static_cast<size_t>((y * w + x) * 3 + c)] / 255.0;
  };
  double view[8][8][3];
  for (int64_t vy = 0; vy < 8; ++vy)
    for (int64_t vx = 0; vx < 8; ++vx) {
      const int64_t y0 = vy * h / 8, y1 = std::max(y0 + 1, (vy + 1) * h / 8);
      const int64_t x0 = vx * w / 8, x1 = std::max(x0 + 1, (vx + 1) * w / 8);
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (int64_t y = y0; y < y1; ++y)
          for (int64_t x = x0; x < x1; ++x) s += px(y, x, c);
        view[vy][vx][c] = s / static_cast<double>((y1 - y0) * (x1 - x0));
      }
    }
  TwoPathRef ref;
  double gsum[3] = {0, 0, 0}, lsum[3] = {0, 0, 0};
  for (int t = 0; t < 4; ++t) {
    for (int c = 0; c < 3; ++c) {
      double s = 0;
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) s += view[(t / 2) * 4 + y][(t % 2) * 4 + x][c];
      ref.tokens.push_back(scale * s / 16.0);
      gsum[c] += scale * s / 16.0;
    }
    ref.tokens.push_back(t);
  }
  const int64_t th = (h + tile - 1) / tile, tw = (w + tile - 1) / tile;
  for (int64_t k = 0; k < th * tw; ++k) {
    for (int c = 0; c < 3; ++c) {
      double s = 0;
      for (int64_t y = 0; y < tile; ++y)
        for (int64_t x = 0; x < tile; ++x)
          s += px(std::min(h - 1, (k / tw) * tile + y), std::min(w - 1, (k % tw) * tile + x), c);
      const double mean = scale * s / static_cast<double>(tile * tile);
      ref.tokens.push_back(mean);
      lsum[c] += mean;
    }
    ref.tokens.push_back(static_cast<double>(4 + k));
  }
  for (int c = 0; c < 3; ++c)
    ref.pooled.push_back(0.5 * (gsum[c] / 4.0 + lsum[c] / static_cast<double>(th * tw)));
  return ref;
}

}  // namespace

TEST_CASE("the installed package has what an out-of-tree plugin needs") {
  CHECK(fs::exists(kPrefix / "include/encgraph/plugin_api.h"));
  CHECK(fs::exists(kPrefix / "include/encgraph/sdk/sdk.hpp"));
  CHECK(fs::exists(kPrefix / "bin/encgraph"));
  CHECK(fs::exists(kPluginFile));
  CHECK(fs::exists(kTwoPathBuild / "libencgraph_two_path.so"));
}

TEST_CASE("the SDK examples load as plugins of this ABI") {
  const encgraph::LoadedPlugin p = encgraph::load_plugin_file(kPluginFile);
  CHECK(p.name == "minimal");
  CHECK(p.version == "2.0.0");
  CHECK(p.abi_major == 1);
  CHECK(p.abi_minor == EG_ABI_VERSION_MINOR);
  CHECK(p.api->struct_size == EG_PLUGIN_API_V1_4_SIZE);
  CHECK(p.api->devices == EG_DEVICE_CPU);
  CHECK(p.api->modalities == EG_MODALITY_IMAGE);
  CHECK((p.api->prepare_capture_staging != nullptr));
  const encgraph::LoadedPlugin two =
      encgraph::load_plugin_file(kTwoPathBuild / "libencgraph_two_path.so");
  CHECK(two.name == "two_path");
  CHECK((two.api->postprocess_outputs != nullptr));
}

TEST_CASE("the example built against the build tree's package loads and runs") {
  const fs::path file = kTreeBuild / "libencgraph_minimal.so";
  REQUIRE(fs::exists(file));
  CHECK(encgraph::load_plugin_file(file).name == "minimal");
  encgraph::Runtime runtime(cpu_config("minimal", kTreeBuild));
  runtime.capture();
  const Image im = patch_means::random_image(16, 16, 9);
  std::vector<encgraph::Item> items;
  items.push_back(runtime.make_item(desc(im)));
  check_rows(runtime.execute(items).item_as_float(0), patch_means::reference(im, 2.0));
}

TEST_CASE("minimal: replayed and eager batches match the reference, output and unit named") {
  encgraph::Runtime runtime(cpu_config("minimal", kBuild));
  REQUIRE(runtime.outputs().size() == 1);
  CHECK(runtime.outputs()[0].name == "patch_means");
  REQUIRE(runtime.model_info().path_units[0] != nullptr);
  CHECK(std::string(runtime.model_info().path_units[0]) == "patches");
  runtime.capture();
  CHECK(runtime.stats().num_graphs > 0);

  // 6, 1, 30 patches, and 1089: more than the largest budget (1024), so eager.
  const std::vector<Image> ims = {
      patch_means::random_image(16, 24, 1), patch_means::random_image(5, 9, 2),
      patch_means::random_image(40, 48, 3), patch_means::random_image(264, 264, 4)};
  std::vector<encgraph::Item> items;
  for (const Image& im : ims) items.push_back(runtime.make_item(desc(im)));
  const encgraph::Result result = runtime.execute(items);
  REQUIRE(result.size() == ims.size());
  for (size_t i = 0; i < ims.size(); ++i) {
    CAPTURE(i);
    check_rows(result.item_as_float(i), patch_means::reference(ims[i], 2.0));
  }
  const encgraph::Stats stats = runtime.stats();
  CHECK(stats.graph_hits == 3);
  CHECK(stats.graph_misses == 1);

  // A synthetic item: values in [0, 2), the index column exact.
  std::vector<encgraph::Item> synthetic;
  eg_item_desc d = desc(ims[0]);
  d.pixels = nullptr;
  d.seed = 7;
  synthetic.push_back(runtime.make_item(d));
  const std::vector<float> s = runtime.execute(synthetic).item_as_float(0);
  REQUIRE(s.size() == 6 * 4);
  for (int64_t r = 0; r < 6; ++r) {
    for (int c = 0; c < 3; ++c) CHECK((s[r * 4 + c] >= 0.0f && s[r * 4 + c] < 2.0f));
    CHECK(s[r * 4 + 3] == doctest::Approx(static_cast<float>(r)));
  }
}

TEST_CASE("minimal: config errors come from the SDK's reader") {
  encgraph::RuntimeConfig cfg = cpu_config("minimal", kBuild);
  cfg.plugin_config = {{"colour", "red"}};
  const std::string unknown = error_of(cfg);
  CHECK(contains(unknown, "unknown config key 'colour'"));
  CHECK(contains(unknown, "known keys: scale"));
  cfg.plugin_config = {{"scael", "2"}};
  CHECK(contains(error_of(cfg), "(did you mean 'scale'?)"));
  cfg.plugin_config = {{"scale", "big"}};
  CHECK(contains(error_of(cfg), "scale = 'big' is not a finite number"));
}

TEST_CASE("two_path: two paths merged by postprocess into two named outputs") {
  for (const int64_t tile : {16, 8}) {
    CAPTURE(tile);
    encgraph::RuntimeConfig cfg = cpu_config("two_path", kTwoPathBuild);
    cfg.plugin_config.emplace_back("tile", std::to_string(tile));
    encgraph::Runtime runtime(cfg);
    REQUIRE(runtime.outputs().size() == 2);
    CHECK(runtime.outputs()[0].name == "tokens");
    CHECK(runtime.outputs()[1].name == "pooled");
    CHECK(runtime.outputs()[1].rows_per_item == 1);
    const eg_model_info& info = runtime.model_info();
    REQUIRE(info.num_paths == 2);
    CHECK(std::string(info.path_units[0]) == "view patches");
    CHECK(std::string(info.path_units[1]) == "tiles");
    runtime.capture();

    const std::vector<Image> ims = {
        patch_means::random_image(64, 48, 11), patch_means::random_image(7, 5, 12),
        patch_means::random_image(33, 100, 13), patch_means::random_image(16, 16, 14)};
    std::vector<encgraph::Item> items;
    for (const Image& im : ims) items.push_back(runtime.make_item(desc(im)));
    const encgraph::Result result = runtime.execute(items);
    REQUIRE(result.size() == ims.size());
    for (size_t i = 0; i < ims.size(); ++i) {
      CAPTURE(i);
      const TwoPathRef ref = two_path_reference(ims[i], 2.0, tile);
      CHECK(result.rows(i, 0) * 4 == static_cast<int64_t>(ref.tokens.size()));
      CHECK(result.rows(i, 1) == 1);
      check_rows(result.item_as_float(i, 0), ref.tokens);
      check_rows(result.item_as_float(i, 1), ref.pooled);
    }
    const encgraph::Stats stats = runtime.stats();
    CHECK(stats.graph_hits == 4);
    CHECK(stats.graph_misses == 0);

    // The same items eagerly: the same values.
    const encgraph::Result eager = runtime.execute(items, encgraph::ExecuteMode::Eager);
    for (size_t i = 0; i < ims.size(); ++i) {
      const TwoPathRef ref = two_path_reference(ims[i], 2.0, tile);
      check_rows(eager.item_as_float(i, 0), ref.tokens);
      check_rows(eager.item_as_float(i, 1), ref.pooled);
    }
  }
}

TEST_CASE("two_path: an out-of-range tile is refused, naming the bounds") {
  encgraph::RuntimeConfig cfg = cpu_config("two_path", kTwoPathBuild);
  cfg.plugin_config = {{"tile", "3"}};
  CHECK(contains(error_of(cfg), "tile = 3 is outside [4, 64]"));
}

TEST_CASE("the installed `encgraph plugins --plugin-dir` lists the example plugin") {
  std::string command = "'";  // appended: GCC 12 warns falsely on "literal" + string&&
  command += (kPrefix / "bin/encgraph").string();
  command += "' plugins --plugin-dir '" + kBuild.string() + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  CHECK(pclose(pipe) == 0);
  CAPTURE(out);
  const std::string abi =
      std::to_string(EG_ABI_VERSION_MAJOR) + "." + std::to_string(EG_ABI_VERSION_MINOR);
  CHECK(contains(out, "minimal  version 2.0.0  abi " + abi + "  modalities image  devices cpu  " +
                          kPluginFile.string()));
}
