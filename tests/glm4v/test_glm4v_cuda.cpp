// The glm4v plugin's CUDA path (bf16): against the CPU path (f32, checked
// against the float64 reference by test_glm4v_cpu) on the same random
// weights, graph replays against eager runs for random mixes of sizes, and
// NaN-poisoned memory never reaching a real output. Needs a GPU: the suite's
// main skips without one (fails when ENCGRAPH_REQUIRE_GPU=1).
#include "../plugin_test_support.hpp"
#include "../test_support.hpp"

#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using encgraph::test::all_finite;
using encgraph::test::rel_error;

constexpr double kBf16Tolerance = 2e-2;

using Keys = std::vector<std::pair<std::string, std::string>>;

// A tiny tower with a qkv bias, and one with GLM-4.1V-9B's widths (hidden
// 1536, 12 heads of 128, blocks' MLP 4096, merger 13696, a 24 x 24 grid) 4
// blocks deep.
Keys tiny_tower() {
  return {{"depth", "3"},
          {"hidden_size", "64"},
          {"num_heads", "2"},
          {"intermediate_size", "200"},
          {"out_hidden_size", "96"},
          {"image_size", "112"},
          {"attention_bias", "true"}};
}

Keys wide_tower() {
  return {{"depth", "4"},
          {"hidden_size", "1536"},
          {"num_heads", "12"},
          {"intermediate_size", "13696"},
          {"out_hidden_size", "4096"},
          {"image_size", "336"}};
}

struct Geometry {
  int64_t h, w, frames;
  uint64_t seed;
};

// Images that keep and change their size in the processor's resize
// (multiples of 28, odd shapes, a strip) and videos with even and odd frame
// counts.
std::vector<Geometry> standard_items() {
  return {{224, 224, 1, 1}, {336, 476, 1, 2}, {200, 700, 1, 3},
          {56, 84, 1, 4},   {224, 224, 4, 5}, {196, 140, 3, 6}};
}

using Outputs = std::vector<std::vector<float>>;  // per item

Outputs run(encgraph::RuntimeConfig rc, const std::vector<Geometry>& geo, bool graphs,
            encgraph::Stats* stats = nullptr) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (const Geometry& g : geo)
    items.push_back(rt.make_item(g.frames > 1 ? encgraph::test::video(g.h, g.w, g.frames, g.seed)
                                              : encgraph::test::image(g.h, g.w, g.seed)));
  const encgraph::Result r = rt.execute(items);
  Outputs out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i, 0));
  if (stats) *stats = rt.stats();
  return out;
}

encgraph::RuntimeConfig config(const Keys& tower, const std::string& device, bool tuned = true) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "glm4v";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = "random";
  rc.plugin_config = tower;
  rc.plugin_config.emplace_back("seed", "3");
  rc.plugin_config.emplace_back("max_budget", "1024");
  if (!tuned) rc.plugin_config.emplace_back("tune_gemm", "false");
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;  // hit counts must not depend on timings
  rc.budgets.token_budgets = {64, 256, 1024};
  rc.budgets.max_items_per_batch = 8;
  return rc;
}

void compare(const Outputs& got, const Outputs& want, double tolerance, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = rel_error(got[i], want[i]);
    MESSAGE(std::string(what) << " item " << i << ": rel error " << e);
    CHECK(!got[i].empty());
    CHECK(all_finite(got[i]));
    CHECK(e < tolerance);
  }
}

}  // namespace

TEST_CASE("CUDA matches the CPU path on the same random weights") {
  for (const Keys& tower : {tiny_tower(), wide_tower()}) {
    CAPTURE(tower[1].second);
    const auto geo = standard_items();
    const auto cpu = run(config(tower, "cpu"), geo, false);
    compare(run(config(tower, "cuda"), geo, true), cpu, kBf16Tolerance, "cuda graphs vs cpu");
    compare(run(config(tower, "cuda"), geo, false), cpu, kBf16Tolerance, "cuda eager vs cpu");
  }
}

TEST_CASE("CUDA graph replays equal eager runs for random mixes of sizes") {
  std::mt19937_64 rng(17);
  std::vector<Geometry> geo;
  for (uint64_t k = 0; k < 28; ++k) {
    const int64_t h = 28 * (2 + static_cast<int64_t>(rng() % 17));
    const int64_t w = 28 * (2 + static_cast<int64_t>(rng() % 17));
    geo.push_back({h, w, k % 7 == 0 ? 2 + static_cast<int64_t>(rng() % 5) : 1, 100 + k});
  }
  encgraph::RuntimeConfig rc = config(wide_tower(), "cuda");
  rc.budgets.token_budgets = {128, 256, 512, 1024};
  encgraph::Stats st;
  const auto graphs = run(rc, geo, true, &st);
  CHECK(st.graph_hits > 0);
  CHECK(st.padded_token_efficiency < 1.0);
  compare(graphs, run(rc, geo, false), kBf16Tolerance, "graphs vs eager");
}

TEST_CASE("NaN-poisoned workspace and outputs never reach real rows") {
  encgraph::RuntimeConfig rc = config(wide_tower(), "cuda", /*tuned=*/false);
  const auto geo = standard_items();
  const auto clean_graphs = run(rc, geo, true);
  const auto clean_eager = run(rc, geo, false);
  rc.poison_memory = true;
  compare(run(rc, geo, true), clean_graphs, 1e-30, "poisoned vs clean graphs");  // bit for bit
  compare(run(rc, geo, false), clean_eager, 1e-30, "poisoned vs clean eager");
  compare(clean_graphs, clean_eager, kBf16Tolerance, "graphs vs eager");
}
