// The deepseek_ocr2 plugin's CPU path (f32) on a tiny model against the
// float64 reference, through the runtime: images with no local crops, several
// crops, odd aspect ratios (tall, wide, the tie rule), each alone and eagerly,
// mixed batches through captured graphs on both paths, and checkpoints under
// either layout's names.
#include "../plugin_test_support.hpp"
#include "../test_support.hpp"
#include "dsocr2_reference.hpp"

#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace {

using encgraph::test::rel_error;

constexpr double kTolerance = 1e-4;  // fp32 against float64

struct Sample {
  int64_t height, width, crops;
  std::vector<uint8_t> pixels;
  std::vector<double> expected;  // [crops*9 + 16 + 1, 24]
};

struct Fixture {
  dsocr2_ref::Config cfg;
  dsocr2_ref::Params params;
  encgraph::test::TempDir dir{"dsocr2-cpu"};
  std::string release, transformers;  // the same weights under each layout's names
  std::vector<Sample> samples;

  Fixture() {
    params = dsocr2_ref::random_params(cfg, 2026);
    release = (dir.path() / "release.safetensors").string();
    dsocr2_ref::write_params(cfg, params, release);
    transformers = (dir.path() / "hf.safetensors").string();
    dsocr2_ref::write_params(cfg, params, transformers, /*transformers=*/true, "model.");
    // (h, w, crops): small (none), 3x2, tall 1x3, wide 2x1, the tie rule 2x2,
    // one tile exactly (none), square above a tile 2x2.
    const int64_t geo[][3] = {{30, 40, 0}, {50, 70, 6}, {100, 30, 3}, {52, 100, 2},
                              {48, 60, 4}, {48, 48, 0}, {64, 64, 4}};
    uint64_t seed = 1;
    for (const auto& g : geo) {
      Sample s{g[0], g[1], g[2], dsocr2_ref::random_pixels(g[0], g[1], seed++), {}};
      const dsocr2_ref::Views v = dsocr2_ref::preprocess(cfg, s.pixels, s.height, s.width);
      REQUIRE(static_cast<int64_t>(v.crops.size()) == s.crops);
      s.expected = dsocr2_ref::image_features(cfg, params, v);
      samples.push_back(std::move(s));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

encgraph::RuntimeConfig runtime_config(const std::string& weights) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "deepseek_ocr2";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = "cpu";
  rc.weights = weights;
  rc.plugin_config = dsocr2_ref::plugin_config(fixture().cfg);
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;
  return rc;
}

std::vector<encgraph::Item> make_items(encgraph::Runtime& rt, const std::vector<size_t>& which) {
  std::vector<encgraph::Item> items;
  for (size_t k : which) {
    const Sample& s = fixture().samples[k];
    eg_item_desc d{};
    d.modality = EG_MODALITY_IMAGE;
    d.channels = 3;
    d.height = s.height;
    d.width = s.width;
    d.frames = 1;
    d.pixels = s.pixels.data();
    items.push_back(rt.make_item(d));
  }
  return items;
}

void check_against_reference(const encgraph::Result& r, const std::vector<size_t>& which) {
  REQUIRE(r.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    CAPTURE(which[i]);
    CHECK(rel_error(r.item_as_float(i, 0), fixture().samples[which[i]].expected) < kTolerance);
  }
}

}  // namespace

TEST_CASE("the reference depends on the crops and on the view (the test can fail)") {
  const Sample& a = fixture().samples[4];  // 4 crops
  const Sample& b = fixture().samples[6];  // 4 crops, another image
  REQUIRE(a.expected.size() == b.expected.size());
  const std::vector<float> fa(a.expected.begin(), a.expected.end());
  CHECK(rel_error(fa, b.expected) > 0.05);
  // the last row is view_separator for every image
  const size_t H = static_cast<size_t>(fixture().cfg.text_hidden);
  for (size_t c = 0; c < H; ++c)
    CHECK(a.expected[a.expected.size() - H + c] == b.expected[b.expected.size() - H + c]);
}

TEST_CASE("each image alone, eagerly, matches the float64 reference") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().release);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  CHECK(rt.model_info().out_hidden_size == fixture().cfg.text_hidden);
  std::map<int64_t, int64_t> work_by_crops;  // crops -> input_size
  for (size_t k = 0; k < fixture().samples.size(); ++k) {
    auto items = make_items(rt, {k});
    const Sample& s = fixture().samples[k];
    CHECK(items[0].spec().output_tokens == s.crops * 9 + 16 + 1);
    // input_size: the views' FLOPs in SAM-patch-equivalents, at least the
    // global view's 16² patches and each crop's 12²; more crops, more work.
    CHECK(items[0].spec().input_size >= 16 * 16 + s.crops * 12 * 12);
    work_by_crops[s.crops] = items[0].spec().input_size;
    check_against_reference(rt.execute(items), {k});
  }
  REQUIRE(work_by_crops.size() >= 2);
  for (auto at = std::next(work_by_crops.begin()); at != work_by_crops.end(); ++at)
    CHECK(at->second > std::prev(at)->second);
}

TEST_CASE("mixed batches through captured graphs on both paths match the reference") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().release);
  rc.budgets.token_budgets = {16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  encgraph::Runtime rt(rc);
  rt.capture();
  CHECK(rt.is_captured());
  // no-crop images between cropped ones: the local path skips them
  const std::vector<size_t> order = {0, 1, 5, 2, 3, 0, 4, 6, 5};
  check_against_reference(rt.execute(make_items(rt, order)), order);
  CHECK(rt.stats().graph_hits > 0);  // replayed, not only eager fallbacks
}

TEST_CASE("a batch of images without crops uses the global path only") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().release);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  const std::vector<size_t> order = {0, 5, 0};
  check_against_reference(rt.execute(make_items(rt, order)), order);
}

TEST_CASE("transformers' tensor names give the same features as DeepSeek's") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().transformers);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  const std::vector<size_t> order = {3, 0, 1};
  check_against_reference(rt.execute(make_items(rt, order)), order);
}
