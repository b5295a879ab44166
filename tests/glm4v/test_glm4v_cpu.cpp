// The glm4v plugin's CPU path (f32) on a tiny tower against the float64
// reference (glm4v_reference.cpp): images of grids smaller and larger than
// the learned 5 x 5 position grid (the bicubic taps reach its border), videos
// with an odd frame count, batches through captured graphs and eagerly, and a
// transformers-style checkpoint folder (model.visual.* tensors, config.json
// of a glm4v_moe model with attention_bias and its own rms_norm_eps,
// preprocessor_config.json's pixel bounds).
#include "../plugin_test_support.hpp"
#include "../spec_for_checks.hpp"
#include "../test_support.hpp"
#include "glm4v_reference.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <array>
#include <fstream>

namespace {

using encgraph::test::rel_error;

constexpr double kTolerance = 1e-4;  // fp32 against float64
const std::string kPrefix = "model.visual.";

struct Sample {
  int64_t frames, height, width;
  std::vector<uint8_t> pixels;
  std::vector<double> expected;
};

// Sides are multiples of 28 inside the pixel bounds, so no resize.
std::vector<Sample> make_samples(const glm4v_ref::Config& cfg, const glm4v_ref::Params& params,
                                 const std::vector<std::array<int64_t, 3>>& geo) {
  std::vector<Sample> out;
  uint64_t seed = 1;
  for (const auto& g : geo) {
    Sample s{g[0], g[1], g[2], glm4v_ref::random_pixels(g[0], g[1], g[2], seed++), {}};
    const auto in = glm4v_ref::preprocess(cfg, s.pixels, s.frames, s.height, s.width);
    s.expected = glm4v_ref::forward(cfg, params, {in}, kPrefix)[0];
    out.push_back(std::move(s));
  }
  return out;
}

struct Fixture {
  glm4v_ref::Config cfg;
  glm4v_ref::Params params;
  encgraph::test::TempDir dir{"glm4v-cpu"};
  std::string weights;
  std::vector<Sample> samples;

  Fixture() {
    params = glm4v_ref::random_params(cfg, 2025, kPrefix);
    weights = (dir.path() / "tiny.safetensors").string();
    glm4v_ref::write_params(cfg, params, weights, kPrefix);
    // 2x3 units, 3x2, a 3-frame video (time padding), 4x3 (a grid of 8x6
    // patches, wider than the 5 x 5 table), a 2-frame video, 2x2, 4x8.
    samples = make_samples(cfg, params,
                           {{1, 56, 84},
                            {1, 84, 56},
                            {3, 56, 84},
                            {1, 112, 84},
                            {2, 56, 56},
                            {1, 56, 56},
                            {1, 112, 224}});
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

encgraph::RuntimeConfig runtime_config(const std::string& weights) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "glm4v";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = "cpu";
  rc.weights = weights;
  rc.plugin_config = glm4v_ref::plugin_config(fixture().cfg);
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;
  return rc;
}

eg_item_desc pixel_item(const Sample& s) {
  eg_item_desc d{};
  d.modality = s.frames > 1 ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = s.height;
  d.width = s.width;
  d.frames = s.frames;
  d.pixels = s.pixels.data();
  return d;
}

std::vector<encgraph::Item> make_items(encgraph::Runtime& rt, const std::vector<Sample>& samples,
                                       const std::vector<size_t>& which) {
  std::vector<encgraph::Item> items;
  for (size_t k : which) items.push_back(rt.make_item(pixel_item(samples[k])));
  return items;
}

void check_against(const encgraph::Result& r, const std::vector<Sample>& samples,
                   const std::vector<size_t>& which) {
  REQUIRE(r.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    CAPTURE(which[i]);
    const std::vector<float> got = r.item_as_float(i, 0);
    CHECK(encgraph::test::all_finite(got));
    CHECK(rel_error(got, samples[which[i]].expected) < kTolerance);
  }
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("the reference's items differ from each other (the test can fail)") {
  const auto& s = fixture().samples;
  // Same geometry, other pixels: 2x2 image against the 2-frame video's.
  const std::vector<float> a(s[5].expected.begin(), s[5].expected.end());
  CHECK(rel_error(a, s[4].expected) > 0.05);
  for (const Sample& x : s) CHECK(!x.expected.empty());
}

TEST_CASE("each item alone, eagerly, matches the float64 reference") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().weights);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  CHECK(rt.model_info().out_hidden_size == fixture().cfg.out);
  const auto& samples = fixture().samples;
  for (size_t k = 0; k < samples.size(); ++k) {
    auto items = make_items(rt, samples, {k});
    const Sample& s = samples[k];
    CHECK(items[0].spec().output_tokens == ((s.frames + 1) / 2) * (s.height / 28) * (s.width / 28));
    check_against(rt.execute(items), samples, {k});
  }
}

TEST_CASE("a mixed batch through captured graphs matches the reference") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().weights);
  rc.budgets.token_budgets = {8, 16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  encgraph::Runtime rt(rc);
  rt.capture();
  CHECK(rt.is_captured());
  const std::vector<size_t> order = {2, 0, 5, 1, 4, 3, 6, 2};
  check_against(rt.execute(make_items(rt, fixture().samples, order)), fixture().samples, order);
  const encgraph::Stats st = rt.stats();
  CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
}

TEST_CASE("a checkpoint folder (glm4v_moe, attention_bias, rms_norm_eps, pixel bounds) alone") {
  glm4v_ref::Config cfg;
  cfg.attention_bias = true;
  cfg.eps = 0.01;
  encgraph::test::TempDir dir("glm4v-folder");
  const glm4v_ref::Params params = glm4v_ref::random_params(cfg, 7, kPrefix);
  glm4v_ref::write_params(cfg, params, dir.path() / "model.safetensors", kPrefix);
  write_text(dir.path() / "config.json", glm4v_ref::config_json(cfg, "glm4v_moe"));
  // Glm4vImageProcessor's keys; longest_edge counts both temporal copies.
  write_text(dir.path() / "preprocessor_config.json",
             R"({"size": {"shortest_edge": 6272, "longest_edge": 50176}, "patch_size": 14,
                 "temporal_patch_size": 2, "merge_size": 2,
                 "image_mean": [0.48145466, 0.4578275, 0.40821073],
                 "image_std": [0.26862954, 0.26130258, 0.27577711]})");
  const std::vector<Sample> samples =
      make_samples(cfg, params, {{1, 56, 84}, {1, 84, 56}, {1, 112, 84}, {1, 56, 56}});
  encgraph::RuntimeConfig rc = runtime_config(dir.path().string());
  rc.plugin_config = {{"min_budget", "4"}};
  rc.budgets.token_budgets = {8, 16, 32};
  encgraph::Runtime rt(rc);
  CHECK(rt.model_info().out_hidden_size == cfg.out);
  const std::vector<size_t> order = {0, 1, 2, 3};
  check_against(rt.execute(make_items(rt, samples, order)), samples, order);
  // The same weights read with the default eps and no qkv bias differ: the
  // folder's values took effect.
  glm4v_ref::Config plain = cfg;
  plain.eps = 1e-5;
  plain.attention_bias = false;  // the reference then leaves the qkv biases out
  const auto in = glm4v_ref::preprocess(plain, samples[0].pixels, 1, 56, 84);
  const std::vector<double> other = glm4v_ref::forward(plain, params, {in}, kPrefix)[0];
  const std::vector<float> got(samples[0].expected.begin(), samples[0].expected.end());
  CHECK(rel_error(got, other) > 10 * kTolerance);
  // A 224x224 image under longest_edge 50176 (2 x 112 x 224): beta = sqrt(2),
  // each side floor(224 / sqrt(2) / 28) * 28 = 140, so 5 x 5 tokens.
  const std::vector<uint8_t> px = glm4v_ref::random_pixels(1, 224, 224, 9);
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = d.width = 224;
  d.frames = 1;
  d.pixels = px.data();
  CHECK(rt.make_item(d).spec().output_tokens == 25);
}

TEST_CASE("a one-frame video is refused as the video processor refuses it") {
  encgraph::Runtime rt(runtime_config(fixture().weights));
  eg_item_desc d = pixel_item(fixture().samples[0]);
  d.modality = EG_MODALITY_VIDEO;
  const std::string msg = encgraph::test::message_of([&] { rt.make_item(d); });
  CHECK(msg.find("at least temporal_patch_size") != std::string::npos);
}

TEST_CASE("ABI 1.2: spec_for equals make_item's spec for random images and videos") {
  // Pixels through item_create, none through item_spec_for_desc: both resize
  // rules (images as two temporal copies, videos over all frames; sides under
  // 28 scaled up), the temporal grid and every refusal must agree.
  encgraph::Runtime rt(runtime_config("random"));
  CHECK(rt.has_spec_for_desc());
  encgraph::test::SpecForRange range;
  range.max_side = 180;
  const encgraph::test::SpecForTally t = encgraph::test::check_spec_for(rt, 31, 60, range);
  CHECK(t.agreed > 25);
  CHECK(t.refused > 3);  // bad geometries and one-frame videos
}
