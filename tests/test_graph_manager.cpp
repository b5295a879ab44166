// The budget-graph manager on the CPU backend: capture/replay equals eager for
// random mixes, padding logics, unset buffers, stats, clear/recapture, capture
// axes, dual paths, eager fallback, and every error path.
#include "manager_checks.hpp"
#include "test_support.hpp"

#include <encgraph/error.hpp>

#include <doctest/doctest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <random>

using namespace encgraph;
using namespace encgraph::test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Captures log lines while alive.
struct LogCapture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  LogCapture() { spdlog::default_logger()->sinks().push_back(sink); }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  bool saw(const std::string& part, const std::string& also = "") const {
    for (const auto& line : sink->last_formatted())
      if (contains(line, part) && contains(line, also)) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("toy output follows the documented formula for known pixels") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "4");
  set(cfg, "bias", "0.75");
  cfg.budgets.token_budgets = {16, 64};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  rt.capture();
  // 28x42 image: 2x3 = 6 tokens; values pixels[(t*4+c) % n] / 255.
  std::vector<uint8_t> pixels(28 * 42 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  eg_item_desc d = image(28, 42, 0);
  d.pixels = pixels.data();
  std::vector<Item> items;
  items.push_back(rt.make_item(d));
  items.push_back(rt.make_item(image(14, 14, 5)));  // shares the batch, must not disturb item 0
  const Result r = rt.execute(items);
  const std::vector<float> out = r.item_as_float(0);
  REQUIRE(out.size() == 6 * 4);
  for (int c = 0; c < 4; ++c) {
    float acc = 0;
    for (int t = 0; t < 6; ++t) {
      acc += pixels[(t * 4 + c) % pixels.size()] / 255.0f;
      const float expected = 0.75f + acc + 0.001f * t + 0.01f * c;
      CHECK(out[t * 4 + c] == doctest::Approx(expected).epsilon(1e-6));
    }
  }
  CHECK(rt.stats().graph_hits == 2);
}

TEST_CASE("random mixes: one graph call equals per-item eager runs, in order") {
  std::mt19937 rng(2024);
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "min_budget", "64");
  set(cfg, "max_budget", "1024");
  Runtime graphs(cfg);
  graphs.capture();
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  Runtime eager(eager_cfg);
  for (int trial = 0; trial < 12; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 1 + trial * 3, 40));
  const Stats s = graphs.stats();
  CHECK(s.graph_hits > 0);
  CHECK(s.num_graphs == 5);
  CHECK(eager.stats().graph_hits == 0);
}

TEST_CASE("padding logics are applied on every replay, also after a larger batch") {
  // The toy's CPU forward fails if x padding is not zero, cu_seqlens is not
  // repeated, or seq_id padding (plugin callback) is not -1.
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {256};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> big, small;
  for (int i = 0; i < 8; ++i) big.push_back(rt.make_item(image(14 * 5, 14 * 6, i)));  // 240
  small.push_back(rt.make_item(image(14, 28, 99)));                                   // 2
  CHECK_NOTHROW(rt.execute(big));
  CHECK_NOTHROW(rt.execute(small));
  CHECK_NOTHROW(rt.execute(big));
  CHECK(rt.stats().graph_hits == 17);
}

TEST_CASE("stats: hits, misses, hit rate, padded-token efficiency") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 128};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 5, 14 * 10, 1)));   // 50 tokens -> 64
  items.push_back(rt.make_item(image(14 * 20, 14 * 20, 2)));  // 400 tokens: no budget
  const Result r = rt.execute(items);
  CHECK(r.rows(0) == 50);
  CHECK(r.rows(1) == 400);
  const Stats s = rt.stats();
  CHECK(s.graph_hits == 1);
  CHECK(s.graph_misses == 1);
  CHECK(s.hit_rate == doctest::Approx(0.5));
  CHECK(s.real_tokens == 50);
  CHECK(s.budget_tokens == 64);
  CHECK(s.padded_token_efficiency == doctest::Approx(50.0 / 64.0));
  CHECK(s.batches_graph == 1);
  CHECK(s.batches_eager == 1);
  CHECK(s.token_budgets == std::vector<int64_t>{64, 128});
  CHECK(s.graph_memory_bytes > 0);
}

TEST_CASE("an item larger than every budget runs eagerly and matches eager") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {16, 32};
  cfg.budgets.max_items_per_batch = 2;
  Runtime graphs(cfg);
  graphs.capture();
  cfg.use_graphs = false;
  Runtime eager(cfg);
  check_batch_equals_per_item(graphs, eager,
                              {image(14 * 12, 14 * 12, 3), image(14, 14, 4), image(28, 28, 5)});
  CHECK(graphs.stats().graph_misses == 1);
}

TEST_CASE("values the plugin leaves unset keep their captured contents") {
  // The toy never sets "bias" at replay; it is 1.5 from capture preparation.
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "bias", "1.5");
  set(cfg, "hidden", "2");
  cfg.budgets.token_budgets = {32};
  cfg.budgets.max_items_per_batch = 2;
  Runtime rt(cfg);
  rt.capture();
  std::vector<uint8_t> zeros(14 * 14 * 3, 0);
  eg_item_desc d = image(14, 14, 0);
  d.pixels = zeros.data();
  std::vector<Item> items;
  items.push_back(rt.make_item(d));
  const std::vector<float> out = rt.execute(items).item_as_float(0);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == doctest::Approx(1.5f));
  CHECK(out[1] == doctest::Approx(1.51f));
}

TEST_CASE("clear releases graphs; capture again works; is_captured and modalities") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 128, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  CHECK_FALSE(rt.is_captured());
  CHECK(rt.supports_modality(EG_MODALITY_IMAGE));
  CHECK(rt.supports_modality(EG_MODALITY_VIDEO));
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().num_graphs == 3);
  const int64_t memory = rt.stats().graph_memory_bytes;
  std::vector<Item> items;
  items.push_back(rt.make_item(image(28, 28, 1)));
  const std::vector<float> before = rt.execute(items).item_as_float(0);
  rt.clear();
  CHECK_FALSE(rt.is_captured());
  CHECK(rt.stats().num_graphs == 0);
  CHECK(rt.execute(items).item_as_float(0) == before);  // eager while cleared
  CHECK(rt.stats().graph_misses == 1);
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().graph_memory_bytes == memory);
  CHECK(rt.execute(items).item_as_float(0) == before);
  CHECK(rt.stats().graph_hits == 2);
}

TEST_CASE("empty calls return an empty result") {
  RuntimeConfig cfg = toy_config("cpu");
  Runtime rt(cfg);
  rt.capture();
  const Result r = rt.execute(std::vector<Item>{});
  CHECK(r.size() == 0);
  CHECK(r.total_rows() == 0);
}

TEST_CASE("capture axes: the cartesian product is captured and the batch's keys replayed") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "capture_axis_keys", "[1, 2, 4]");
  cfg.budgets.token_budgets = {64, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime graphs(cfg);
  graphs.capture();
  CHECK(graphs.stats().num_graphs == 6);
  cfg.use_graphs = false;
  Runtime eager(cfg);
  // Same frame count within a call, so per-item runs select the same key.
  check_batch_equals_per_item(graphs, eager, {video(28, 28, 2, 1), video(42, 28, 2, 2)});
  check_batch_equals_per_item(graphs, eager, {video(28, 28, 3, 3), video(28, 56, 3, 4)});
  CHECK(graphs.stats().graph_misses == 0);
  // Scale 4 (3 frames) differs from scale 2: the key reached the graph.
  std::vector<Item> a, b;
  a.push_back(graphs.make_item(video(28, 28, 2, 9)));
  b.push_back(graphs.make_item(video(28, 28, 3, 9)));
  CHECK(graphs.execute(a).item_as_float(0)[0] != graphs.execute(b).item_as_float(0)[0]);
}

TEST_CASE("more than 64 graphs are captured with a warning") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  std::string keys = "[";
  for (int k = 1; k <= 33; ++k) keys += std::to_string(k) + (k < 33 ? ", " : "]");
  set(cfg, "capture_axis_keys", keys);
  cfg.budgets.token_budgets = {8, 16};
  cfg.budgets.max_items_per_batch = 2;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.stats().num_graphs == 66);
  CHECK(log.saw("capturing 66 graphs", "33 capture-axis key combinations"));
}

TEST_CASE("past 64 graphs without capture axes the warning names the budgets, not axes") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets.clear();
  for (int64_t b = 8; b <= 8 * 70; b += 8) cfg.budgets.token_budgets.push_back(b);
  cfg.budgets.max_items_per_batch = 1;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.stats().num_graphs == 70);
  CHECK(log.saw("capturing 70 graphs", "70 budgets"));
  CHECK_FALSE(log.saw("capturing 70 graphs", "capture-axis"));
}

TEST_CASE("a plan over max_graphs through capture axes fails before anything is captured") {
  RuntimeConfig cfg = toy_config("cpu");
  std::string keys = "[";
  for (int k = 1; k <= 40; ++k) keys += std::to_string(k) + (k < 40 ? ", " : "]");
  set(cfg, "capture_axis_keys", keys);
  cfg.budgets.token_budgets = {8, 16, 32};
  cfg.budgets.max_items_per_batch = 1;
  cfg.budgets.max_graphs = 100;  // 3 budgets x 40 keys = 120
  try {
    Runtime rt(cfg);
    FAIL("a plan of 120 graphs was accepted under max_graphs = 100");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(contains(e.what(), "120 graphs"));
    CHECK(contains(e.what(), "limits.max_graphs"));
  }
}

TEST_CASE("two paths: per-path budgets, zero-token path skipped, own post-processing") {
  std::mt19937 rng(99);
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  set(cfg, "local_min_budget", "128");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  Runtime graphs(cfg);
  CHECK(graphs.plan().path_budgets[0] == std::vector<int64_t>{16, 64, 512});
  CHECK(graphs.plan().path_budgets[1] == std::vector<int64_t>{0, 128, 256, 512});
  graphs.capture();
  CHECK(graphs.stats().num_graphs == 6);
  cfg.use_graphs = false;
  Runtime eager(cfg);
  for (int trial = 0; trial < 6; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 2 + trial * 2, 12));
  // Only small items: the local path gets no tokens and is not run.
  check_batch_equals_per_item(graphs, eager, {image(14, 14, 1), image(28, 28, 2)});
}

TEST_CASE("configuration errors name the setting to change") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {16, 64};
  cfg.budgets.max_items_per_batch = 32;
  std::string msg = error_of([&] { Runtime rt(cfg); });
  CHECK(contains(msg, "max_items_per_batch (32) must be <= the smallest token budget (16)"));

  RuntimeConfig bad_device = toy_config("tpu");
  CHECK(contains(error_of([&] { Runtime rt(bad_device); }), "runtime.device = \"tpu\""));

  RuntimeConfig missing = toy_config("cpu", "no_such_plugin");
  msg = error_of([&] { Runtime rt(missing); });
  CHECK(contains(msg, "plugin 'no_such_plugin' not found"));
  CHECK(contains(msg, "Available:"));

  RuntimeConfig bad_key = toy_config("cpu");
  set(bad_key, "hiden", "3");
  msg = error_of([&] { Runtime rt(bad_key); });
  CHECK(contains(msg, "plugin 'toy': create failed"));
  CHECK(contains(msg, "unknown config key 'hiden'"));

  RuntimeConfig dual_axes = toy_config("cpu", "toy_dual");
  set(dual_axes, "capture_axis_keys", "[1, 2]");
  CHECK(contains(error_of([&] { Runtime rt(dual_axes); }),
                 "combines several paths with capture axes"));
}

TEST_CASE("a failing forward during capture names the plugin and the budget") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "fail_forward_at", "128");
  cfg.budgets.token_budgets = {64, 128, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  const std::string msg = error_of([&] { rt.capture(); });
  CHECK(contains(msg, "plugin 'toy'"));
  CHECK(contains(msg, "budget 128"));
  CHECK(contains(msg, "asked to fail"));
  CHECK_FALSE(rt.is_captured());
}

TEST_CASE("out of memory while capturing: a clear error, or the budget dropped if configured") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "huge_workspace_from", "1024");
  cfg.budgets.token_budgets = {256, 512, 1024, 2048};
  cfg.budgets.max_items_per_batch = 4;
  {
    Runtime rt(cfg);
    const std::string msg = error_of([&] { rt.capture(); });
    CHECK(contains(msg, "out of host memory"));
    CHECK(contains(msg, "workspace"));
    CHECK_FALSE(rt.is_captured());
  }
  LogCapture log;
  cfg.drop_budget_on_oom = true;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().num_graphs == 2);
  CHECK(log.saw("dropping budget 2048"));
  CHECK(log.saw("dropping budget 1024"));
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 20, 14 * 20, 1)));  // 400 tokens -> 512 graph
  items.push_back(rt.make_item(image(14 * 20, 14 * 30, 2)));  // 600 tokens -> eager
  const Result r = rt.execute(items);
  CHECK(r.rows(1) == 600);
  CHECK(rt.stats().graph_hits == 1);
  CHECK(rt.stats().graph_misses == 1);
}

TEST_CASE("invalid items are rejected with the plugin's reason") {
  Runtime rt(toy_config("cpu"));
  const std::string msg = error_of([&] { rt.make_item(image(0, 14, 1)); });
  CHECK(contains(msg, "item_create failed"));
  CHECK(contains(msg, "geometry must be positive"));
}

TEST_CASE("an item may outlive its runtime: it keeps the plugin instance alive") {
  Item survivor;
  {
    Runtime rt(toy_config("cpu"));
    survivor = rt.make_item(image(28, 28, 1));
    CHECK(survivor.spec().output_tokens == 4);
  }
  CHECK(survivor.get() != nullptr);  // destroyed after the runtime, without a crash
}

TEST_CASE("a small batch on a far larger budget runs eagerly when that is faster") {
  // The toy's cost grows with the budget: 120 tokens on a 16384 budget is far
  // cheaper eagerly; a batch that nearly fills the budget still replays.
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "256");
  set(cfg, "check_padding", "false");
  cfg.budgets.token_budgets = {64, 16384};
  cfg.budgets.max_items_per_batch = 64;
  cfg.prefer_faster_path = true;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> small, full;
  small.push_back(rt.make_item(image(14 * 10, 14 * 12, 1)));  // 120 tokens
  for (int i = 0; i < 4; ++i) full.push_back(rt.make_item(image(14 * 60, 14 * 64, i)));  // 15360
  const std::vector<float> eager_rows = rt.execute(small).item_as_float(0);
  Stats s = rt.stats();
  CHECK(s.batches_eager_chosen == 1);
  CHECK(s.graph_hits == 0);
  CHECK(s.graph_misses == 0);
  rt.execute(full);
  s = rt.stats();
  CHECK(s.batches_graph == 1);
  CHECK(s.graph_hits == 4);

  cfg.prefer_faster_path = false;  // the same batch replayed: identical rows
  Runtime always_graph(cfg);
  always_graph.capture();
  std::vector<Item> again;
  again.push_back(always_graph.make_item(image(14 * 10, 14 * 12, 1)));
  CHECK(always_graph.execute(again).item_as_float(0) == eager_rows);
  CHECK(always_graph.stats().graph_hits == 1);
}
