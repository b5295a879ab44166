// Benchmark of making a request's items, the plugin's host preprocessing
// (resize, normalise, patchify, rotary tables): Runtime::prepare of 16 random
// 224x224 images through the qwen2_5_vl plugin (a one-layer tower with the
// 7B model's patch and head sizes: the items are the real model's) with
// runtime.item_threads 1, 2, 4 and 8, side by side. Medians of 15 after 3
// warm-ups, interleaved; the threads actually used are printed (at most one
// per item).
// "reuse" tunes malloc as the encgraph command does (malloc_tuning.hpp);
// "default" keeps glibc's defaults: run both to compare.
//   bench_item_making [cpu|cuda] [side] [reuse|default]
#include <encgraph/malloc_tuning.hpp>
#include <encgraph/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace encgraph;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

RuntimeConfig config(const std::string& device, int threads) {
  RuntimeConfig c;
  c.plugin = "qwen2_5_vl";
  c.plugin_dirs = {ENCGRAPH_BENCH_PLUGIN_DIR};
  c.device = device;
  c.weights = "random";
  c.use_graphs = false;  // prepare needs no graph
  c.item_threads = threads;
  c.plugin_config = {{"depth", "1"},
                     {"hidden_size", "1280"},
                     {"num_heads", "16"},
                     {"intermediate_size", "128"},
                     {"out_hidden_size", "64"},
                     {"fullatt_block_indexes", "[0]"},
                     {"dtype", device == "cpu" ? "f32" : "bf16"}};
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string device = argc > 1 ? argv[1] : "cpu";
  const int64_t side = argc > 2 ? std::stoll(argv[2]) : 224;
  const std::string malloc_mode = argc > 3 ? argv[3] : "reuse";
  const bool tuned = malloc_mode == "reuse" && reuse_freed_memory();
  constexpr int kItems = 16, kWarmup = 3, kSamples = 15;
  std::mt19937 rng(7);
  std::vector<std::vector<uint8_t>> pixels(kItems);
  std::vector<eg_item_desc> descs(kItems);
  for (int i = 0; i < kItems; ++i) {
    pixels[i].resize(static_cast<size_t>(side * side * 3));
    for (auto& p : pixels[i]) p = static_cast<uint8_t>(rng());
    eg_item_desc& d = descs[i];
    d.modality = EG_MODALITY_IMAGE;
    d.channels = 3;
    d.height = side;
    d.width = side;
    d.frames = 1;
    d.pixels = pixels[i].data();
  }
  std::printf("making %d items of %lldx%lld on %s (qwen2_5_vl preprocessing), malloc %s\n", kItems,
              static_cast<long long>(side), static_cast<long long>(side), device.c_str(),
              tuned ? "reusing freed memory" : "glibc defaults");
  std::printf("%-14s %8s %12s %12s %9s\n", "item_threads", "used", "ms/request", "ms/item",
              "speed-up");
  // Every variant's runtime first, then the samples interleaved, so that a
  // change in the machine's load reaches every variant alike.
  const std::vector<int> variants = {1, 2, 4, 8};
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int threads : variants)
    runtimes.push_back(std::make_unique<Runtime>(config(device, threads)));
  std::vector<std::vector<double>> ms(variants.size());
  for (int s = 0; s < kWarmup + kSamples; ++s) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const auto t0 = Clock::now();
      const Request request = runtimes[v]->prepare(descs);
      const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (request.size() != static_cast<size_t>(kItems)) return 1;
      if (s >= kWarmup) ms[v].push_back(elapsed);
    }
  }
  const double serial = median(ms[0]);
  for (size_t v = 0; v < variants.size(); ++v) {
    const double m = median(ms[v]);
    std::printf("%-14d %8d %12.2f %12.3f %8.2fx\n", variants[v], runtimes[v]->item_threads(kItems),
                m, m / kItems, serial / m);
  }
  return 0;
}
