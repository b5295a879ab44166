// The plugin's CUDA path (bf16): against the CPU path on the same random
// weights at the released towers' widths (so400m/14: head_dim 72, 729 tokens;
// base/16: head_dim 64, 196 tokens) in every output mode, graph replays
// against eager runs for batches that pad, tuned products (tune_gemm) against
// untuned ones and their choices kept in the tuning cache, and NaN-poisoned memory (runtime
// workspace and output, padded pixel rows at the ABI) never reaching a real
// output. Needs a GPU: the suite's main skips without one (fails when
// ENCGRAPH_REQUIRE_GPU=1).
#include "../fp8_gpu_support.hpp"
#include "siglip_test_support.hpp"

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>

namespace {

using siglip_test::KeyValues;
using siglip_test::rel_error;

constexpr double kBf16Tolerance = 2e-2;

// A released tower's widths, `layers` deep.
KeyValues so400m(int layers) {
  return {{"hidden_size", "1152"},
          {"intermediate_size", "4304"},
          {"num_attention_heads", "16"},
          {"num_hidden_layers", std::to_string(layers)},
          {"image_size", "384"},
          {"patch_size", "14"},
          {"seed", "3"}};
}

KeyValues base16(int layers) {
  return {{"hidden_size", "768"},
          {"intermediate_size", "3072"},
          {"num_attention_heads", "12"},
          {"num_hidden_layers", std::to_string(layers)},
          {"image_size", "224"},
          {"patch_size", "16"},
          {"seed", "4"}};
}

// kv with `extra` on top: a key in both takes extra's value (a TOML table
// holds each key once, and the plugin refuses a key given twice).
KeyValues with(KeyValues kv, const KeyValues& extra) {
  for (const auto& [key, value] : extra) {
    auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& e) { return e.first == key; });
    if (it != kv.end())
      it->second = value;
    else
      kv.emplace_back(key, value);
  }
  return kv;
}

encgraph::RuntimeConfig config(const KeyValues& kv, const std::string& device) {
  encgraph::RuntimeConfig rc = siglip_test::runtime_config(kv, device, "random");
  if (device == "cpu") rc.plugin_config.emplace_back("dtype", "f32");
  return rc;
}

// Images of assorted sizes, resized by the plugin; the seed varies the pixels.
std::vector<std::vector<uint8_t>>& pixel_store() {
  static std::vector<std::vector<uint8_t>> store;
  return store;
}

std::vector<eg_item_desc> images(size_t n, uint64_t seed) {
  std::vector<eg_item_desc> d;
  for (size_t i = 0; i < n; ++i) {
    const int64_t h = 200 + static_cast<int64_t>((i * 37) % 300);
    const int64_t w = 180 + static_cast<int64_t>((i * 53) % 400);
    pixel_store().push_back(siglip_ref::random_pixels(h, w, 3, seed + i));
    d.push_back(siglip_test::pixel_item(pixel_store().back(), h, w));
  }
  return d;
}

void compare(const std::vector<std::vector<float>>& got,
             const std::vector<std::vector<float>>& want, double tolerance, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = rel_error(got[i], want[i]);
    MESSAGE(std::string(what) << " item " << i << ": rel error " << e);
    CHECK(siglip_test::all_finite(got[i]));
    CHECK(e < tolerance);
  }
}

siglip_test::DeviceOps cuda_ops() {
  siglip_test::DeviceOps ops;
  ops.device = EG_DEVICE_CUDA;
  ops.alloc = [](size_t n) {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, std::max<size_t>(n, 1)) == cudaSuccess);
    return p;
  };
  ops.release = [](void* p) { cudaFree(p); };
  ops.upload = [](void* d, const void* s, size_t n) {
    REQUIRE(cudaMemcpy(d, s, n, cudaMemcpyHostToDevice) == cudaSuccess);
  };
  ops.download = [](void* d, const void* s, size_t n) {
    REQUIRE(cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  };
  ops.poison = [](void* p, size_t n) { REQUIRE(cudaMemset(p, 0xFF, n) == cudaSuccess); };
  return ops;
}

}  // namespace

TEST_CASE("CUDA matches the CPU path on the same random weights, every output mode") {
  const KeyValues modes[] = {{}, {{"output", "pooled"}}, {{"feature_layer", "-2"}}};
  for (const KeyValues& model : {so400m(2), base16(3)}) {
    CAPTURE(model[0].second);
    const auto items = images(2, 11);
    for (const KeyValues& mode : modes) {
      CAPTURE(mode.empty() ? "last_hidden_state" : mode[0].second);
      const KeyValues kv = with(model, mode);
      const auto cpu = siglip_test::run(config(kv, "cpu"), items, false);
      compare(siglip_test::run(config(kv, "cuda"), items, true), cpu, kBf16Tolerance,
              "cuda graphs vs cpu");
      compare(siglip_test::run(config(kv, "cuda"), items, false), cpu, kBf16Tolerance,
              "cuda eager vs cpu");
    }
  }
}

TEST_CASE("CUDA: both named outputs from one forward match the CPU path") {
  const KeyValues kv = with(so400m(2), {{"outputs", "[last_hidden_state, pooled]"}});
  const auto items = images(5, 40);  // with max_budget_images 4: a padded second batch
  encgraph::RuntimeConfig cpu_rc = config(kv, "cpu");
  const auto cpu = siglip_test::run_outputs(cpu_rc, items, false);
  REQUIRE(cpu.size() == 2);
  encgraph::RuntimeConfig rc = config(with(kv, {{"max_budget_images", "4"}}), "cuda");
  rc.poison_memory = true;
  for (bool graphs : {true, false}) {
    CAPTURE(graphs);
    const auto got = siglip_test::run_outputs(rc, items, graphs);
    REQUIRE(got.size() == 2);
    compare(got[0], cpu[0], kBf16Tolerance, "last_hidden_state vs cpu");
    compare(got[1], cpu[1], kBf16Tolerance, "pooled vs cpu");
  }
}

// precision = "fp8_linear": the layers' q/k/v, fc1 and fc2 in FP8 (the pooling
// head stays bf16). Against the CPU path on the same random weights, every
// output mode, in graphs (with batches that pad and NaN-poisoned memory) and
// eager: within FP8's error, above bf16's (the products did change).
TEST_CASE("CUDA: precision fp8_linear stays within FP8's error of the CPU path") {
  const KeyValues fp8 = {{"precision", "fp8_linear"}, {"max_budget_images", "4"}};
  if (!encgraph::test::fp8_gpu_or_refused(config(with(so400m(2), fp8), "cuda"))) return;
  const auto items = images(5, 70);  // batches of 4 and 1 (padded)
  for (const KeyValues& mode : {KeyValues{}, KeyValues{{"output", "pooled"}}}) {
    CAPTURE(mode.empty() ? "last_hidden_state" : "pooled");
    const KeyValues kv = with(so400m(3), mode);
    const auto cpu = siglip_test::run(config(kv, "cpu"), items, false);
    const auto bf16 = siglip_test::run(config(kv, "cuda"), items, true);
    encgraph::RuntimeConfig rc = config(with(kv, fp8), "cuda");
    rc.poison_memory = true;
    const auto graphs = siglip_test::run(rc, items, true);
    compare(graphs, cpu, 8e-2, "fp8 graphs vs cpu");  // H100: 0.047-0.050
    compare(siglip_test::run(rc, items, false), cpu, 8e-2, "fp8 eager vs cpu");
    for (size_t i = 0; i < items.size(); ++i) {
      const double e8 = rel_error(graphs[i], cpu[i]), e16 = rel_error(bf16[i], cpu[i]);
      MESSAGE("item " << i << ": fp8 error " << e8 << ", bf16 error " << e16);
      CHECK(e8 > e16);
    }
  }
  // A width the FP8 products cannot take is refused, naming the rule.
  CHECK_THROWS_WITH(
      encgraph::Runtime{config(
          with(so400m(1), {{"precision", "fp8_linear"}, {"intermediate_size", "4312"}}), "cuda")},
      doctest::Contains("a multiple of 16"));
}

TEST_CASE("CUDA graph replays equal eager runs when batches pad") {
  encgraph::RuntimeConfig rc = config(with(so400m(4), {{"max_budget_images", "8"}}), "cuda");
  const auto items = images(19, 100);  // batches of 8, 8 and 3 (padded to 4 images)
  encgraph::Stats st;
  const auto graphs = siglip_test::run(rc, items, true, &st);
  CHECK(st.graph_hits == 19);
  CHECK(st.padded_token_efficiency < 1.0);
  compare(graphs, siglip_test::run(rc, items, false), 1e-2, "graphs vs eager");
}

// tune_gemm (the default) times the products' algorithms in each graph's
// warm-up: the outputs stay within bf16 rounding of the heuristic's picks,
// every captured size's products land in the tuning cache, and a second
// start takes them from there (same choices, same outputs, same file).
TEST_CASE("CUDA: tuned products match untuned ones and persist in the tuning cache") {
  encgraph::test::TempDir dir("siglip-tuning");
  const KeyValues model = with(so400m(2), {{"max_budget_images", "4"}});
  const auto items = images(3, 700);
  const auto untuned =
      siglip_test::run(config(with(model, {{"tune_gemm", "false"}}), "cuda"), items, true);
  const encgraph::RuntimeConfig tuned_rc =
      config(with(model, {{"tuning_cache", dir.path().string()}}), "cuda");
  auto cache_lines = [&] { return encgraph::test::tuning_cache_lines(dir.path(), "gemm:"); };

  const auto tuned = siglip_test::run(tuned_rc, items, true);
  compare(tuned, untuned, 1e-2, "tuned vs untuned graphs");
  const std::vector<std::string> lines = cache_lines();
  // Graphs of 1, 2 and 4 images; patch_embed, q/k/v, out_proj, fc1, fc2 each.
  for (const int64_t rows : {729, 1458, 2916}) {
    CAPTURE(rows);
    const std::string prefix = "gemm:m=" + std::to_string(rows) + ",";
    CHECK(std::count_if(lines.begin(), lines.end(),
                        [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }) == 5);
  }
  compare(siglip_test::run(tuned_rc, items, true), tuned, 1e-6, "second start vs first");
  CHECK(cache_lines() == lines);
}

TEST_CASE("NaN-poisoned workspace and output never reach real rows (runtime)") {
  for (const KeyValues& mode : {KeyValues{}, KeyValues{{"output", "pooled"}}}) {
    encgraph::RuntimeConfig rc = config(with(so400m(2), mode), "cuda");
    rc.budgets.token_budgets = {729 * 4};
    rc.budgets.max_items_per_batch = 4;
    if (!mode.empty()) rc.budgets.token_budgets = {4};
    const auto items = images(5, 300);  // 4 + 1: the second batch pads 3 images
    const auto clean = siglip_test::run(rc, items, false);
    rc.poison_memory = true;
    compare(siglip_test::run(rc, items, true), clean, 1e-2, "poisoned graphs vs clean eager");
    compare(siglip_test::run(rc, items, false), clean, 1e-2, "poisoned eager vs clean eager");
  }
}

TEST_CASE("NaN in padded pixel rows never reaches real rows (ABI)") {
  const auto items = images(2, 500);
  for (const KeyValues& mode : {KeyValues{}, KeyValues{{"output", "pooled"}}}) {
    const KeyValues kv = with(so400m(2), mode);
    const auto clean = siglip_test::run(config(kv, "cuda"), items, false);
    const int64_t budget = mode.empty() ? 5 * 729 : 5;
    compare(siglip_test::forward_with_nan_padding(cuda_ops(), kv, items, budget, 5), clean, 1e-2,
            "NaN padding vs clean");
  }
}
