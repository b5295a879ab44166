// The budget-graph manager on CUDA graphs (H200): random mixes equal per-item
// eager runs, NaN-poisoned memory never reaches real outputs, named outputs and
// frame-bounded video batches with host-staged capture inputs, 16+ budgets cost
// about one budget's memory, interleaved replays stay correct (also queued
// back to back, their uploads overlapping the replay before), rows stay exact
// with the cost model and the first-batch split on, and illegal calls
// or out-of-memory during capture become clear errors.
#include "manager_checks.hpp"
#include "test_support.hpp"

#include <encgraph/error.hpp>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <functional>
#include <random>

using namespace encgraph;
using namespace encgraph::test;

namespace {

size_t device_used_bytes() {
  size_t free_b = 0, total_b = 0;
  REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  return total_b - free_b;
}

// Graphs of the toy (hidden 32, budgets 64..2048, memory poisoned) against
// per-item eager runs on `trials` random mixes; the graphs runtime's stats.
Stats random_mixes_equal_eager(RuntimeConfig cfg, unsigned seed, int trials) {
  std::mt19937 rng(seed);
  set(cfg, "hidden", "32");
  set(cfg, "min_budget", "64");
  set(cfg, "max_budget", "2048");
  cfg.poison_memory = true;
  Runtime graphs(cfg);
  CHECK(graphs.device_type() == EG_DEVICE_CUDA);
  graphs.capture();
  CHECK(graphs.stats().num_graphs == 6);
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  Runtime eager(eager_cfg);
  // Many calls of different sizes: the graphs replay interleaved in random order.
  for (int trial = 0; trial < trials; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 1 + (trial * 7) % 23, 40));
  return graphs.stats();
}

}  // namespace

TEST_CASE("CUDA graphs: random mixes equal per-item eager runs, with memory poisoned") {
  const Stats s = random_mixes_equal_eager(toy_config("cuda"), 7, 16);
  CHECK(s.graph_hits > 100);
  MESSAGE("hits " << s.graph_hits << ", misses " << s.graph_misses << ", efficiency "
                  << s.padded_token_efficiency);
}

TEST_CASE("CUDA graphs with the cost model and the first-batch split on: rows equal eager") {
  // The runtime's defaults (toy_config turns prefer_faster_path off so that
  // hit counts do not depend on timings): batches may run eagerly by choice,
  // and a request's first batch may split once its staging is measured.
  // Whatever the timings choose, every row equals a per-item eager run.
  RuntimeConfig cfg = toy_config("cuda");
  cfg.prefer_faster_path = true;
  cfg.pipeline_first_batch = true;
  const Stats s = random_mixes_equal_eager(cfg, 13, 16);
  CHECK(s.graph_hits + s.graph_misses > 0);
  MESSAGE("batches: " << s.batches_graph << " graph, " << s.batches_eager << " eager ("
                      << s.batches_eager_chosen << " chosen)");
}

TEST_CASE("CUDA graphs: two paths and capture axes") {
  std::mt19937 rng(11);
  RuntimeConfig cfg = toy_config("cuda", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  cfg.poison_memory = true;
  Runtime graphs(cfg);
  graphs.capture();
  cfg.use_graphs = false;
  Runtime eager(cfg);
  for (int trial = 0; trial < 6; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 2 + trial * 3, 12));

  RuntimeConfig axes = toy_config("cuda");
  set(axes, "capture_axis_keys", "[1, 2, 4]");
  axes.budgets.token_budgets = {64, 256};
  axes.budgets.max_items_per_batch = 4;
  Runtime axis_graphs(axes);
  axis_graphs.capture();
  CHECK(axis_graphs.stats().num_graphs == 6);
  axes.use_graphs = false;
  Runtime axis_eager(axes);
  check_batch_equals_per_item(axis_graphs, axis_eager, {video(28, 28, 3, 1), video(56, 28, 3, 2)});
}

TEST_CASE("capturing 16 budgets costs about one budget's workspace, not the sum") {
  RuntimeConfig cfg = toy_config("cuda", "toy_faults");
  set(cfg, "workspace_per_token", "65536");  // 64 KiB of scratch per budget token
  for (int64_t b = 1; b <= 16; ++b) cfg.budgets.token_budgets.push_back(1024 * b);
  cfg.budgets.max_items_per_batch = 16;
  Runtime rt(cfg);
  const size_t before = device_used_bytes();
  rt.capture();
  const size_t after = device_used_bytes();
  CHECK(rt.stats().num_graphs == 16);
  const double largest_ws = 16384.0 * 65536.0;  // 1 GiB
  const double sum_ws = 136.0 * 1024.0 * 65536.0;
  const double used = static_cast<double>(after - before);
  MESSAGE("graphs " << rt.stats().num_graphs << ": device memory " << used / 1048576.0
                    << " MiB; largest budget's workspace " << largest_ws / 1048576.0
                    << " MiB; sum over budgets " << sum_ws / 1048576.0 << " MiB");
  CHECK(used < 1.25 * largest_ws);
  CHECK(rt.stats().graph_memory_bytes < 1.25 * largest_ws);
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 50, 14 * 50, 1)));
  CHECK(rt.execute(items).rows(0) == 2500);
}

TEST_CASE("an illegal synchronisation inside the forward fails the capture clearly") {
  RuntimeConfig cfg = toy_config("cuda", "toy_faults");
  set(cfg, "illegal_sync", "true");
  cfg.budgets.token_budgets = {64};
  cfg.budgets.max_items_per_batch = 2;
  Runtime rt(cfg);
  const std::string msg = error_of([&] { rt.capture(); });
  MESSAGE(msg);
  CHECK(msg.find("illegal inside a CUDA graph") != std::string::npos);
  CHECK(msg.find("'toy_faults'") != std::string::npos);
  CHECK(msg.find("budget 64") != std::string::npos);
  CHECK_FALSE(rt.is_captured());
}

TEST_CASE("out of device memory while capturing: clear error or dropped budgets") {
  RuntimeConfig cfg = toy_config("cuda", "toy_faults");
  set(cfg, "huge_workspace_from", "1024");
  cfg.budgets.token_budgets = {256, 512, 1024, 2048};
  cfg.budgets.max_items_per_batch = 4;
  {
    Runtime rt(cfg);
    const std::string msg = error_of([&] { rt.capture(); });
    MESSAGE(msg);
    CHECK(msg.find("cudaErrorMemoryAllocation") != std::string::npos);
    CHECK(msg.find("lower the largest token budget") != std::string::npos);
  }
  cfg.drop_budget_on_oom = true;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.stats().num_graphs == 2);
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 20, 14 * 20, 1)));
  CHECK(rt.execute(items).rows(0) == 400);
}

TEST_CASE("CUDA graphs: named outputs and many short videos, with memory poisoned") {
  for (const char* plugin : {"toy", "toy_dual"}) {
    RuntimeConfig cfg = toy_config("cuda", plugin);
    set(cfg, "hidden", "16");
    cfg.budgets.token_budgets = {64, 256, 1024};
    cfg.budgets.max_items_per_batch = 8;
    cfg.budgets.max_frames_per_batch = 6;
    cfg.poison_memory = true;
    Runtime graphs(cfg);
    graphs.capture();
    RuntimeConfig eager_cfg = cfg;
    eager_cfg.use_graphs = false;
    Runtime eager(eager_cfg);
    std::vector<eg_item_desc> descs;
    for (int i = 0; i < 20; ++i) descs.push_back(video(28, 42, 2, 10 + i));
    descs.push_back(video(28, 28, 8, 99));  // over the frame bound: eager
    check_batch_equals_per_item(graphs, eager, descs);
    std::vector<Item> items;
    for (const auto& d : descs) items.push_back(graphs.make_item(d));
    const Result r = graphs.execute(items);
    REQUIRE(r.num_outputs() == 2);
    for (size_t i = 0; i < items.size(); ++i) {
      const std::vector<float> rows = r.item_as_float(i, 0), mean = r.item_as_float(i, 1);
      const size_t hidden = static_cast<size_t>(r.hidden_size(1));
      REQUIRE(mean.size() == hidden);
      for (size_t d = 0; d < hidden; ++d) {
        double sum = 0;
        const size_t n = rows.size() / hidden;
        for (size_t t = 0; t < n; ++t) sum += rows[t * hidden + d];
        CHECK(mean[d] == doctest::Approx(sum / static_cast<double>(n)).epsilon(1e-3));
      }
    }
    const Stats s = graphs.stats();
    INFO(plugin);
    CHECK(s.paths[0].eager_by_reason[static_cast<int>(EagerReason::TooManyFrames)] == 2);
    CHECK(s.graph_misses == 2);
  }
}

TEST_CASE("CUDA graphs: requests queued back to back, uploads overlapping the replay before") {
  std::mt19937 rng(23);
  RuntimeConfig cfg = toy_config("cuda");
  // 2048 rows of 512 floats: 4 MiB spans go through the copy stream and the
  // device mirror; the 256-row budget's 512 KiB spans are copied in line.
  set(cfg, "hidden", "512");
  set(cfg, "min_budget", "256");
  set(cfg, "max_budget", "2048");
  cfg.poison_memory = true;
  Runtime graphs(cfg);
  graphs.capture();
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  Runtime eager(eager_cfg);
  // Nothing waits between requests: the host fills the next staging slot and
  // its upload runs while the previous replay computes.
  std::vector<std::vector<eg_item_desc>> descs;
  std::vector<std::vector<Item>> items;
  std::vector<Result> results;
  for (int r = 0; r < 12; ++r) {
    descs.push_back(random_descs(rng, 3 + r % 5, 40));
    items.emplace_back();
    for (const auto& d : descs.back()) items.back().push_back(graphs.make_item(d));
    results.push_back(graphs.execute(items.back()));
  }
  // Each request's rows are read while the ones after it may still run: its
  // copies wait for its own mark, on the copy-out stream.
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("request " << r);
    check_result_equals_per_item(results[r], items[r], eager, descs[r]);
  }
  // The mirror is there (and counted as graph memory) unless switched off.
  const int64_t with_mirror = graphs.stats().graph_memory_bytes;
  RuntimeConfig in_line_cfg = cfg;
  in_line_cfg.overlap_uploads = false;
  Runtime in_line(in_line_cfg);
  in_line.capture();
  const int64_t without = in_line.stats().graph_memory_bytes;
  CHECK(with_mirror - without >= 2 * 2048 * 512 * 4);  // both slots hold the x buffer
}
