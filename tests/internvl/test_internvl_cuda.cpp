// The plugin's CUDA path (bf16) against its CPU path (f32) on the same random
// weights: a tiny model and InternViT-300M's widths (head_dim 64, 1025 rows a
// tile, 256 image tokens a tile), images of mixed tile counts eagerly and
// through captured graphs with NaN-poisoned memory, the RMSNorm variant, and
// the qk-norm variant refused with its fix; precision = "fp8_linear" (the
// encoder layers in FP8, GELU's exact form after fc1) within FP8's error, and
// refused with RMSNorm. Needs a GPU: the suite's main
// skips without one (fails when ENCGRAPH_REQUIRE_GPU=1).
#include "../fp8_gpu_support.hpp"
#include "../plugin_test_support.hpp"
#include "../test_support.hpp"

#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

namespace {

using encgraph::test::message_of;
using encgraph::test::rel_error;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

constexpr double kBf16Tolerance = 2e-2;

KeyValues tiny() {
  return {{"hidden_size", "64"},        {"intermediate_size", "128"},
          {"num_attention_heads", "4"}, {"num_hidden_layers", "2"},
          {"image_size", "56"},         {"patch_size", "14"},
          {"text_hidden_size", "48"},   {"max_patches", "6"},
          {"max_budget_tiles", "16"},   {"seed", "5"}};
}

KeyValues vit300m(int layers) {
  return {{"hidden_size", "1024"},       {"intermediate_size", "4096"},
          {"num_attention_heads", "16"}, {"num_hidden_layers", std::to_string(layers)},
          {"image_size", "448"},         {"patch_size", "14"},
          {"text_hidden_size", "896"},   {"max_patches", "6"},
          {"max_budget_tiles", "8"},     {"seed", "6"}};
}

encgraph::RuntimeConfig config(KeyValues kv, const std::string& device) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "internvl";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = "random";
  if (device == "cpu") kv.emplace_back("dtype", "f32");
  rc.plugin_config = kv;
  rc.stats_log_interval = 0;
  return rc;
}

struct Images {
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<eg_item_desc> descs;
  Images(const std::vector<std::pair<int64_t, int64_t>>& sizes, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (const auto& [h, w] : sizes) {
      pixels.emplace_back(static_cast<size_t>(h * w * 3));
      for (uint8_t& v : pixels.back()) v = static_cast<uint8_t>(rng() & 0xffu);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      eg_item_desc d{};
      d.modality = EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = sizes[i].first;
      d.width = sizes[i].second;
      d.frames = 1;
      d.pixels = pixels[i].data();
      descs.push_back(d);
    }
  }
};

std::vector<std::vector<float>> run(encgraph::RuntimeConfig rc, const Images& im, bool graphs) {
  rc.use_graphs = graphs;
  rc.poison_memory = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (const eg_item_desc& d : im.descs) items.push_back(rt.make_item(d));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i));
  return out;
}

void compare_devices(const KeyValues& kv, const Images& im) {
  const auto cpu = run(config(kv, "cpu"), im, false);
  for (bool graphs : {false, true}) {
    CAPTURE(graphs);
    const auto gpu = run(config(kv, "cuda"), im, graphs);
    REQUIRE(gpu.size() == cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      CAPTURE(i);
      REQUIRE(gpu[i].size() == cpu[i].size());
      CHECK(encgraph::test::all_finite(gpu[i]));
      CHECK(rel_error(gpu[i], std::vector<double>(cpu[i].begin(), cpu[i].end())) < kBf16Tolerance);
    }
  }
}

}  // namespace

TEST_CASE("a tiny model on CUDA matches the CPU path, eagerly and in graphs") {
  // 1, 2+1, 2x2+1, 6+1 and 1 tiles.
  const Images im({{56, 56}, {56, 112}, {112, 112}, {40, 300}, {70, 50}}, 11);
  SUBCASE("layer norms") {
    compare_devices(tiny(), im);
  }
  SUBCASE("rms_norm, q/k/v biases, the final layernorm") {
    KeyValues kv = tiny();
    kv.insert(
        kv.end(),
        {{"norm_type", "rms_norm"}, {"attention_bias", "true"}, {"use_mean_pooling", "false"}});
    compare_devices(kv, im);
  }
}

TEST_CASE("InternViT-300M's widths on CUDA match the CPU path") {
  // One tile, and a 3x1 grid plus its thumbnail.
  compare_devices(vit300m(2), Images({{448, 448}, {300, 900}}, 12));
}

TEST_CASE("qk-norm is refused on CUDA with its fix") {
  KeyValues kv = tiny();
  kv.emplace_back("use_qk_norm", "true");
  const std::string m = message_of([&] { encgraph::Runtime rt(config(kv, "cuda")); });
  CHECK(m.find("use_qk_norm") != std::string::npos);
  CHECK(m.find("device = \"cpu\"") != std::string::npos);
}

// precision = "fp8_linear": the encoder layers' qkv, fc1 and fc2 in FP8 (the
// exact GELU a pass between fc1 and its quantisation), the rest bf16. Against
// the CPU path, eagerly and in graphs with NaN-poisoned memory: within FP8's
// error (SigLIP's bound) and above bf16's.
TEST_CASE("precision fp8_linear runs the encoder layers in FP8, within its error of the CPU path") {
  KeyValues fp8 = vit300m(2);
  fp8.emplace_back("precision", "fp8_linear");
  if (!encgraph::test::fp8_gpu_or_refused(config(fp8, "cuda"))) return;
  const Images im({{448, 448}, {300, 900}}, 13);
  const auto cpu = run(config(vit300m(2), "cpu"), im, false);
  const auto bf16 = run(config(vit300m(2), "cuda"), im, true);
  for (bool graphs : {false, true}) {
    CAPTURE(graphs);
    encgraph::test::check_fp8_items(run(config(fp8, "cuda"), im, graphs), bf16, cpu, 8e-2);
  }
}

// An MLP narrower than the stream runs in FP8 too: fc2's output passes
// through attention's buffer, [rows, hidden_size], on its way into x.
TEST_CASE("precision fp8_linear runs an MLP narrower than hidden_size") {
  KeyValues narrow = vit300m(2);
  for (auto& [key, value] : narrow)
    if (key == "intermediate_size") value = "512";
  KeyValues fp8 = narrow;
  fp8.emplace_back("precision", "fp8_linear");
  if (!encgraph::test::fp8_gpu_or_refused(config(fp8, "cuda"))) return;
  const Images im({{448, 448}, {300, 900}}, 14);
  encgraph::test::check_fp8_items(run(config(fp8, "cuda"), im, true),
                                  run(config(narrow, "cuda"), im, true),
                                  run(config(narrow, "cpu"), im, false), 8e-2);
}

// The exact GELU runs inside the quantisation of fc1's output, which holds
// rows of at most 8,192 values: a wider MLP is refused at start-up with the
// fix (encoder_kit::cuda::require_fp8_block).
TEST_CASE("an exact-GELU MLP over 8192 wide is refused in FP8, naming the fix") {
  KeyValues kv = tiny();
  for (auto& [key, value] : kv)
    if (key == "intermediate_size") value = "8208";
  kv.emplace_back("precision", "fp8_linear");
  if (!encgraph::test::fp8_gpu_or_refused(config(kv, "cuda"))) return;
  const std::string m = message_of([&] { encgraph::Runtime rt(config(kv, "cuda")); });
  CHECK(m.find("intermediate_size at most 8192 with the exact GELU, got 8208") !=
        std::string::npos);
  CHECK(m.find("precision = \"bf16\"") != std::string::npos);
}

TEST_CASE("RMSNorm is refused in FP8, naming the fix") {
  KeyValues kv = tiny();
  kv.insert(kv.end(), {{"norm_type", "rms_norm"}, {"precision", "fp8_linear"}});
  const std::string m = message_of([&] { encgraph::Runtime rt(config(kv, "cuda")); });
  CHECK(m.find("needs LayerNorm") != std::string::npos);
  CHECK(m.find("precision = \"bf16\"") != std::string::npos);
}
