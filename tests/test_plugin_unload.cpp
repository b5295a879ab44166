// Each model plugin loaded, used and unloaded many times in one process, as a
// host that reloads plugins would: every round makes an instance, runs items
// through captured graphs and eagerly (encoder_kit's CPU kernels start their
// thread pool), destroys everything and closes the library. After each round
// the library must be gone (a library that cannot unload would hide the
// question) and the process must hold no more threads than after the first
// (a plugin joins the threads it started before it goes). In the sanitizer
// build, thread-local state a plugin leaves behind fails the process at exit
// (LeakSanitizer reads every thread's TLS), so this suite runs there without
// any leak-check exception.
//
// ENCGRAPH_UNLOAD_ROUNDS sets the rounds per plugin (default 100).
#include "device_backend.hpp"
#include "graph_manager.hpp"
#include "plugin_instance.hpp"
#include "test_support.hpp"

#include <encgraph/plugin_loader.hpp>

#include <dlfcn.h>
#include <doctest/doctest.h>
#include <link.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace encgraph;
using namespace encgraph::test;

namespace {

using Keys = std::vector<std::pair<std::string, std::string>>;

int rounds() {
  if (const char* v = std::getenv("ENCGRAPH_UNLOAD_ROUNDS"); v && std::atoi(v) > 0)
    return std::atoi(v);
  return 100;
}

size_t thread_count() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

// The TLS module id of the loaded library `file` (0: it has no TLS segment).
size_t tls_module_of(const std::string& file) {
  struct Search {
    std::string file;
    size_t modid = 0;
    bool found = false;
  } search{file};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (!info->dlpi_name || s->file != info->dlpi_name) return 0;
        s->modid = info->dlpi_tls_modid;
        s->found = true;
        return 1;
      },
      &search);
  REQUIRE_MESSAGE(search.found, file << " is not among the loaded objects");
  return search.modid;
}

std::string library(const std::string& name) {
  return (plugin_dirs().at(0) / ("libencgraph_" + name + ".so")).string();
}

// One round: load, make an instance, run two images through graphs (when
// `graphs`) and eagerly, check the rows are finite, tear everything down,
// unload.
void round_trip(const std::string& name, const Keys& keys, int64_t side, bool graphs) {
  const std::string file = library(name);
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(handle, dlerror());
  {
    auto entry = reinterpret_cast<eg_plugin_entry_fn>(dlsym(handle, EG_PLUGIN_ENTRY_SYMBOL));
    REQUIRE(bool(entry));
    LoadedPlugin loaded;
    loaded.name = name;
    loaded.file = file;
    loaded.api = entry(host_services());
    REQUIRE(loaded.api != nullptr);
    // No thread_local in plugin code: a dlopen'd library's TLS is dynamic,
    // and a block of a library unloaded since is left to LeakSanitizer's
    // tracer (and to any thread that outlived the unload) as a stale entry.
    REQUIRE_MESSAGE(tls_module_of(file) == 0, file << " has thread-local storage");
    loaded.abi_major = loaded.api->abi_major;
    loaded.abi_minor = loaded.api->abi_minor;

    RuntimeConfig cfg;
    cfg.plugin = name;
    cfg.device = "cpu";
    cfg.weights = "random";
    cfg.plugin_config = keys;
    cfg.prefer_faster_path = false;
    cfg.stats_log_interval = 0;
    cfg.use_graphs = graphs;
    auto instance =
        std::make_shared<PluginInstance>(loaded, EG_DEVICE_CPU, 0, cfg.weights, cfg.plugin_config);
    GraphManager manager(make_cpu_backend(), *instance, cfg);
    if (graphs) manager.capture();
    std::vector<Item> items;
    for (uint64_t seed = 1; seed <= 2; ++seed) {
      eg_item_spec spec{};
      eg_item* item = instance->make_item(image(side, side, seed), spec);
      items.emplace_back(instance, item, spec);
    }
    std::vector<const Item*> ptrs;
    for (const auto& i : items) ptrs.push_back(&i);
    for (const ExecuteMode mode : {ExecuteMode::Planned, ExecuteMode::Eager}) {
      const Result r = manager.execute(ptrs, mode);
      REQUIRE(r.size() == 2);
      for (size_t i = 0; i < r.size(); ++i) {
        const std::vector<float> rows = r.item_as_float(i);
        REQUIRE_FALSE(rows.empty());
        for (const float v : rows) REQUIRE(std::isfinite(v));
      }
    }
  }
  REQUIRE(dlclose(handle) == 0);
  // Gone: a library that stays mapped (a unique symbol, a leaked reference)
  // would keep its threads and TLS out of this test's reach.
  void* still = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (still) dlclose(still);
  REQUIRE_MESSAGE(still == nullptr, file << " is still loaded after dlclose");
}

void check_plugin(const std::string& name, const Keys& keys, int64_t side, bool graphs = true) {
  round_trip(name, keys, side, graphs);
  // Threads that outlive the first round for good (OpenBLAS's, started once)
  // are the baseline; every later round must come back to it.
  const size_t baseline = thread_count();
  const int n = rounds();
  for (int k = 1; k < n; ++k) {
    CAPTURE(k);
    round_trip(name, keys, side, graphs);
    REQUIRE(thread_count() == baseline);
  }
  MESSAGE(name << ": " << n << " rounds of load, use, unload");
}

}  // namespace

TEST_CASE("qwen2_5_vl: loaded, used and unloaded again and again") {
  check_plugin("qwen2_5_vl",
               {{"depth", "1"},
                {"hidden_size", "16"},
                {"num_heads", "4"},
                {"intermediate_size", "16"},
                {"out_hidden_size", "8"},
                {"fullatt_block_indexes", "[0]"},
                {"dtype", "f32"},
                {"max_pixels", "50176"},
                {"min_budget", "16"},
                {"max_budget", "64"}},
               56);
}

TEST_CASE("qwen3_vl: loaded, used and unloaded again and again") {
  check_plugin("qwen3_vl",
               {{"depth", "2"},
                {"hidden_size", "32"},
                {"num_heads", "2"},
                {"intermediate_size", "32"},
                {"out_hidden_size", "16"},
                {"num_position_embeddings", "16"},
                {"deepstack_visual_indexes", "[0, 1]"},
                {"dtype", "f32"},
                {"min_pixels", "4096"},
                {"max_pixels", "65536"},
                {"min_budget", "16"},
                {"max_budget", "64"}},
               64);
}

TEST_CASE("siglip: loaded, used and unloaded again and again") {
  check_plugin("siglip",
               {{"hidden_size", "16"},
                {"intermediate_size", "16"},
                {"num_hidden_layers", "1"},
                {"num_attention_heads", "4"},
                {"image_size", "16"},
                {"patch_size", "8"},
                {"max_budget_images", "4"},
                {"dtype", "f32"}},
               16);
}

TEST_CASE("deepseek_ocr2: loaded, used and unloaded again and again") {
  // The tiny model of the plugin's CPU suite (tests/deepseek_ocr2); a 64 x 64
  // image gets crops, so both of its paths run. Eagerly only: capturing its
  // nine graphs would make a round ten times longer and start nothing more.
  check_plugin("deepseek_ocr2",
               {{"patch_size", "4"},
                {"sam_image_size", "64"},
                {"sam_hidden_size", "32"},
                {"sam_layers", "3"},
                {"sam_heads", "2"},
                {"sam_mlp_dim", "48"},
                {"window_size", "5"},
                {"global_attn_indexes", "[1]"},
                {"neck_channels", "16"},
                {"downsample_channels", "[24, 32]"},
                {"encoder_layers", "2"},
                {"encoder_heads", "4"},
                {"encoder_kv_heads", "2"},
                {"encoder_intermediate_size", "40"},
                {"text_hidden_size", "24"},
                {"global_size", "64"},
                {"tile_size", "48"},
                {"min_crops", "2"},
                {"max_crops", "6"}},
               64, /*graphs=*/false);
}

TEST_CASE("glm4v: loaded, used and unloaded again and again") {
  check_plugin("glm4v",
               {{"depth", "1"},
                {"hidden_size", "16"},
                {"num_heads", "2"},
                {"intermediate_size", "16"},
                {"out_hidden_size", "16"},
                {"image_size", "56"},
                {"dtype", "f32"},
                {"min_pixels", "6272"},
                {"max_pixels", "50176"},
                {"min_budget", "4"},
                {"max_budget", "16"}},
               56);
}

TEST_CASE("internvl: loaded, used and unloaded again and again") {
  check_plugin("internvl",
               {{"hidden_size", "16"},
                {"intermediate_size", "16"},
                {"num_hidden_layers", "1"},
                {"num_attention_heads", "2"},
                {"image_size", "28"},
                {"patch_size", "14"},
                {"text_hidden_size", "8"},
                {"max_patches", "2"},
                {"max_budget_tiles", "4"},
                {"dtype", "f32"}},
               40);
}
