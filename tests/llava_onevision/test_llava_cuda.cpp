// The plugin's CUDA path (bf16) against its CPU path (f32) on the same random
// weights: a tiny model and so400m's widths at 384-pixel tiles (27 x 27
// patches, head_dim 72), images of odd aspect ratios (one large enough for the
// anyres_max shrink) and a 3-frame video in one batch, eagerly and through
// captured graphs with NaN-poisoned memory. Needs a GPU: the suite's main
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

using encgraph::test::rel_error;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

constexpr double kBf16Tolerance = 2e-2;

KeyValues tiny() {
  return {{"hidden_size", "64"},        {"intermediate_size", "128"},
          {"num_attention_heads", "4"}, {"num_hidden_layers", "2"},
          {"image_size", "56"},         {"patch_size", "14"},
          {"text_hidden_size", "48"},   {"vision_aspect_ratio", "anyres_max_2"},
          {"max_budget_tiles", "40"},   {"seed", "5"}};
}

KeyValues so400m(int layers) {
  return {{"hidden_size", "1152"},
          {"intermediate_size", "4304"},
          {"num_attention_heads", "16"},
          {"num_hidden_layers", std::to_string(layers)},
          {"image_size", "384"},
          {"patch_size", "14"},
          {"text_hidden_size", "896"},
          {"max_budget_tiles", "40"},
          {"seed", "6"}};
}

encgraph::RuntimeConfig config(KeyValues kv, const std::string& device) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "llava_onevision";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = "random";
  if (device == "cpu") kv.emplace_back("dtype", "f32");
  rc.plugin_config = kv;
  rc.stats_log_interval = 0;
  return rc;
}

// Images of the given sizes, then one video of `frames` frames of the last size.
struct Items {
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<eg_item_desc> descs;
  Items(const std::vector<std::pair<int64_t, int64_t>>& sizes, int64_t frames, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool video = i + 1 == sizes.size();
      const auto [h, w] = sizes[i];
      pixels.emplace_back(static_cast<size_t>((video ? frames : 1) * h * w * 3));
      for (uint8_t& v : pixels.back()) v = static_cast<uint8_t>(rng() & 0xffu);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool video = i + 1 == sizes.size();
      eg_item_desc d{};
      d.modality = video ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = sizes[i].first;
      d.width = sizes[i].second;
      d.frames = video ? frames : 1;
      d.pixels = pixels[i].data();
      descs.push_back(d);
    }
  }
};

std::vector<std::vector<float>> run(encgraph::RuntimeConfig rc, const Items& im, bool graphs) {
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

void compare_devices(const KeyValues& kv, const Items& im) {
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
  // 1x1+1, 2x2+1 cropped, 3x1+1 (shrunk by anyres_max_2), then a 3-frame video.
  compare_devices(tiny(), Items({{56, 56}, {60, 100}, {170, 40}, {50, 70}}, 3, 11));
}

TEST_CASE("so400m's widths on CUDA match the CPU path") {
  // A 2x2 canvas cropped to 640x480's aspect, then a 2-frame video.
  compare_devices(so400m(2), Items({{480, 640}, {300, 400}}, 2, 12));
}

// precision = "fp8_linear": the SigLIP tower's layers in FP8, the projector in
// bf16. Against the CPU path, eagerly and in graphs with NaN-poisoned memory:
// within FP8's error (SigLIP's own bound) and above bf16's.
TEST_CASE("precision fp8_linear runs the tower in FP8, within its error of the CPU path") {
  KeyValues fp8 = so400m(2);
  fp8.emplace_back("precision", "fp8_linear");
  if (!encgraph::test::fp8_gpu_or_refused(config(fp8, "cuda"))) return;
  const Items im({{480, 640}, {300, 400}}, 2, 13);
  const auto cpu = run(config(so400m(2), "cpu"), im, false);
  const auto bf16 = run(config(so400m(2), "cuda"), im, true);
  for (bool graphs : {false, true}) {
    CAPTURE(graphs);
    encgraph::test::check_fp8_items(run(config(fp8, "cuda"), im, graphs), bf16, cpu, 8e-2);
  }
}
