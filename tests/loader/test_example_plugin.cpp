// The out-of-tree example (examples/minimal_plugin), built by the
// loader_example_build fixture against an installed copy of this build: it must
// load, capture and run on the CPU, and the installed `encgraph` must list it.
#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kBuild = EXAMPLE_BUILD_DIR;
const fs::path kPrefix = EXAMPLE_PREFIX;
const fs::path kPluginFile = kBuild / "libencgraph_minimal.so";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

encgraph::RuntimeConfig cpu_config() {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = "minimal";
  cfg.plugin_dirs = {kBuild};
  cfg.device = "cpu";
  cfg.plugin_config = {{"scale", "2"}};
  return cfg;
}

eg_item_desc image(int64_t height, int64_t width, const uint8_t* pixels, uint64_t seed) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = height;
  d.width = width;
  d.frames = 1;
  d.pixels = pixels;
  d.seed = seed;
  return d;
}

}  // namespace

TEST_CASE("the installed package has what an out-of-tree plugin needs") {
  CHECK(fs::exists(kPrefix / "include/encgraph/plugin_api.h"));
  CHECK(fs::exists(kPrefix / "bin/encgraph"));
  CHECK(fs::exists(kPluginFile));
}

TEST_CASE("the example plugin loads") {
  const encgraph::LoadedPlugin p = encgraph::load_plugin_file(kPluginFile);
  CHECK(p.name == "minimal");
  CHECK(p.version == "1.0.0");
  CHECK(p.abi_major == EG_ABI_VERSION_MAJOR);
  CHECK(p.api->devices == EG_DEVICE_CPU);
  CHECK(p.api->modalities == EG_MODALITY_IMAGE);
}

TEST_CASE("the example plugin captures and executes an item on the CPU") {
  encgraph::Runtime runtime(cpu_config());
  runtime.capture();
  REQUIRE(runtime.is_captured());
  CHECK(runtime.stats().num_graphs > 0);

  // A white 16x24 image: 2x3 patches whose channel means are 1, times scale 2.
  const std::vector<uint8_t> white(16 * 24 * 3, 255);
  std::vector<encgraph::Item> items;
  items.push_back(runtime.make_item(image(16, 24, white.data(), 0)));
  items.push_back(runtime.make_item(image(40, 8, nullptr, 7)));  // synthetic, 5 patches
  const encgraph::Result result = runtime.execute(items);
  REQUIRE(result.size() == 2);
  REQUIRE(result.rows(0) == 6);
  REQUIRE(result.rows(1) == 5);
  REQUIRE(result.hidden_size() == 4);

  const std::vector<float> a = result.item_as_float(0);
  for (int64_t r = 0; r < 6; ++r) {
    for (int c = 0; c < 3; ++c) CHECK(a[r * 4 + c] == doctest::Approx(2.0f));
    CHECK(a[r * 4 + 3] == doctest::Approx(static_cast<float>(r)));  // index within its image
  }
  const std::vector<float> b = result.item_as_float(1);
  for (int64_t r = 0; r < 5; ++r) {
    for (int c = 0; c < 3; ++c) {
      CHECK(b[r * 4 + c] >= 0.0f);
      CHECK(b[r * 4 + c] < 2.0f);
    }
    CHECK(b[r * 4 + 3] == doctest::Approx(static_cast<float>(r)));
  }
  const encgraph::Stats stats = runtime.stats();
  CHECK(stats.graph_hits == 2);
  CHECK(stats.graph_misses == 0);
}

TEST_CASE("the example plugin rejects an unknown config key with its own message") {
  encgraph::RuntimeConfig cfg = cpu_config();
  cfg.plugin_config = {{"colour", "red"}};
  try {
    encgraph::Runtime runtime(cfg);
    FAIL("an unknown config key was accepted");
  } catch (const encgraph::Error& e) {
    CHECK(std::string(e.what()).find("unknown config key 'colour'") != std::string::npos);
  }
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
  CHECK(contains(out, "minimal  version 1.0.0  abi 1.0  modalities image  devices cpu  " +
                          kPluginFile.string()));
}
