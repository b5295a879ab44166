// The executor's arithmetic: percentiles, statistics deltas, progress text,
// request chunking and warm-up exclusion on the CPU toy plugin.
#include "cli.hpp"
#include "executor.hpp"
#include "host_test_support.hpp"
#include "progress.hpp"

#include <doctest/doctest.h>

using namespace encgraph::host;

TEST_CASE("percentiles are nearest-rank") {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  CHECK(percentile(v, 50) == 50);
  CHECK(percentile(v, 99) == 99);
  CHECK(percentile(v, 100) == 100);
  CHECK(percentile({7.0}, 99) == 7.0);
  CHECK(percentile({}, 50) == 0.0);
  CHECK(percentile({3.0, 1.0, 2.0}, 50) == 2.0);
}

TEST_CASE("statistics deltas subtract counters and recompute rates") {
  encgraph::Stats before, after;
  before.graph_hits = 10;
  before.graph_misses = 10;
  before.real_tokens = 100;
  before.budget_tokens = 400;
  after = before;
  after.graph_hits = 40;
  after.graph_misses = 20;
  after.real_tokens = 400;
  after.budget_tokens = 800;
  after.num_graphs = 3;
  const auto d = stats_delta(after, before);
  CHECK(d.graph_hits == 30);
  CHECK(d.graph_misses == 10);
  CHECK(d.hit_rate == doctest::Approx(0.75));
  CHECK(d.padded_token_efficiency == doctest::Approx(0.75));
  CHECK(d.num_graphs == 3);
}

TEST_CASE("statistics deltas subtract every path's counters and eager reasons") {
  encgraph::Stats before, after;
  encgraph::PathStats p;
  p.name = "global";
  p.unit = "patches";
  p.graphs = 4;
  p.batches_graph = 2;
  p.batches_eager = 3;
  p.eager_by_reason[static_cast<int>(encgraph::EagerReason::TooLarge)] = 3;
  p.real_tokens = 10;
  p.budget_tokens = 20;
  before.paths = {p, p};
  before.batches_mixed = 1;
  after = before;
  after.batches_mixed = 4;
  after.paths[1].batches_graph = 7;
  after.paths[1].batches_eager = 5;
  after.paths[1].eager_by_reason[static_cast<int>(encgraph::EagerReason::TooLarge)] = 4;
  after.paths[1].eager_by_reason[static_cast<int>(encgraph::EagerReason::ChosenFaster)] = 1;
  after.paths[1].real_tokens = 30;
  after.paths[1].budget_tokens = 60;
  const auto d = stats_delta(after, before);
  CHECK(d.batches_mixed == 3);
  REQUIRE(d.paths.size() == 2);
  CHECK(d.paths[0].batches_graph == 0);
  CHECK(d.paths[0].batches_eager == 0);
  CHECK(d.paths[1].name == "global");
  CHECK(d.paths[1].unit == "patches");
  CHECK(d.paths[1].graphs == 4);  // a capture fact: taken, not subtracted
  CHECK(d.paths[1].batches_graph == 5);
  CHECK(d.paths[1].batches_eager == 2);
  CHECK(d.paths[1].eager_by_reason[static_cast<int>(encgraph::EagerReason::TooLarge)] == 1);
  CHECK(d.paths[1].eager_by_reason[static_cast<int>(encgraph::EagerReason::ChosenFaster)] == 1);
  CHECK(d.paths[1].real_tokens == 20);
  CHECK(d.paths[1].budget_tokens == 40);
}

TEST_CASE("progress text shows items, rate and ETA") {
  CHECK(Progress::describe(10, 40, 2.0) == "10/40 items, 5.0 items/s, ETA 6s");
  CHECK(Progress::describe(40, 40, 2.0) == "40/40 items, 20.0 items/s");
  CHECK(Progress::describe(0, 40, 0.0) == "0/40 items, 0.0 items/s");
  CHECK(Progress::describe(1, 1000, 1.0).find("ETA 16m39s") != std::string::npos);
}

TEST_CASE("a workload runs in requests; warm-up requests are not measured") {
  const HostConfig c = load_config_text(host_test::toy_config(), "t.toml", {});
  auto engine = make_engine(c.runtime, {});
  engine->capture();
  WorkloadConfig w;
  w.count = 10;
  w.min_side = 28;
  w.max_side = 56;
  w.side_multiple = 28;
  const auto work = synthetic_workload(w);
  ExecOptions o;
  o.request_size = 4;
  o.warmup_requests = 2;
  o.progress = false;
  std::vector<size_t> request_sizes;
  const Measurement m =
      execute_workload(*engine, work, o, [&](const auto& items, const encgraph::Result& result) {
        request_sizes.push_back(items.size());
        CHECK(result.size() == items.size());
        CHECK(result.num_outputs() == 2);  // the toy's rows and pooled
        CHECK(result.to_host().size() ==
              static_cast<size_t>(result.total_rows() * result.hidden_size() * 4));
      });
  CHECK(request_sizes == std::vector<size_t>{4, 4, 2});
  CHECK(m.requests == 3);
  CHECK(m.items == 10);
  CHECK(m.latencies.size() == 3);
  int64_t tokens = 0;
  for (const auto& it : work) tokens += (it.height / 14) * (it.width / 14);  // the toy's count
  CHECK(m.tokens == tokens);
  CHECK(m.stats.graph_hits + m.stats.graph_misses == 10);  // warm-up excluded
  CHECK(engine->stats().graph_hits + engine->stats().graph_misses == 18);
  // The toy has one path, in tokens; every batch of it replayed a graph.
  REQUIRE(m.stats.paths.size() == 1);
  CHECK(m.stats.paths[0].batches_graph == m.stats.batches_graph);
  CHECK(m.stats.paths[0].batches_eager == m.stats.batches_eager);
  CHECK(m.stats.batches_mixed == 0);
}

TEST_CASE("videos are refused when the plan allows no frames") {
  const HostConfig c = load_config_text(
      host_test::toy_config("[budgets]\nmax_frames_per_batch = 0\n"), "t.toml", {});
  auto rt = make_runtime(c.runtime);
  WorkItem v;
  v.modality = EG_MODALITY_VIDEO;
  v.height = v.width = 28;
  v.frames = 2;
  CHECK_THROWS_WITH_AS(check_workload_supported(*rt, {v}), doctest::Contains("allows no frames"),
                       encgraph::Error);
}
