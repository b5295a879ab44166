// The serve metrics' Prometheus text: the all-hit request histogram's
// cumulative buckets, count and sum, and each model's cache counters, where
// every lookup is one of hits, misses or coalesced.
#include "serve/serve_metrics.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace encgraph::host::serve;

namespace {

// The value of the line starting with `series` (name and labels), or -1.
double value_of(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("the all-hit request histogram: cumulative buckets, count and sum") {
  ServeMetrics m;
  for (double s : {5e-6, 60e-6, 60e-6, 3e-3, 1.0}) m.count_cache_only_request(s);
  const std::string text = m.render({});
  const std::string h = "encgraph_cache_only_request_seconds";
  CHECK(text.find("# TYPE " + h + " histogram") != std::string::npos);
  CHECK(value_of(text, h + "_bucket{le=\"1e-05\"}") == 1);
  CHECK(value_of(text, h + "_bucket{le=\"5e-05\"}") == 1);
  CHECK(value_of(text, h + "_bucket{le=\"0.0001\"}") == 3);
  CHECK(value_of(text, h + "_bucket{le=\"0.0025\"}") == 3);
  CHECK(value_of(text, h + "_bucket{le=\"0.005\"}") == 4);
  CHECK(value_of(text, h + "_bucket{le=\"0.1\"}") == 4);
  CHECK(value_of(text, h + "_bucket{le=\"+Inf\"}") == 5);
  CHECK(value_of(text, h + "_count") == 5);
  CHECK(value_of(text, h + "_sum") == doctest::Approx(1.003125).epsilon(1e-6));
}

TEST_CASE("cache counters per model, lookups = hits + misses + coalesced") {
  ServeMetrics m;
  CacheStats s;
  s.hits = 7;
  s.misses = 3;
  s.coalesced = 2;
  s.lookups = 12;
  const std::string text = m.render({{"qwen", s, 1 << 20}});
  CHECK(value_of(text, "encgraph_cache_lookups_total{model=\"qwen\"}") == 12);
  CHECK(value_of(text, "encgraph_cache_hits_total{model=\"qwen\"}") == 7);
  CHECK(value_of(text, "encgraph_cache_misses_total{model=\"qwen\"}") == 3);
  CHECK(value_of(text, "encgraph_cache_coalesced_total{model=\"qwen\"}") == 2);
  CHECK(value_of(text, "encgraph_cache_budget_bytes{model=\"qwen\"}") == 1 << 20);
  CHECK(text.find("encgraph_cache_dedup_total") == std::string::npos);
}

TEST_CASE("worker time by phase: one labelled counter each, summed") {
  ServeMetrics m;
  m.count_worker(WorkerPhase::Prepare, 0.25);
  m.count_worker(WorkerPhase::Prepare, 0.5);
  m.count_worker(WorkerPhase::Collect, 2.0);
  m.count_worker(WorkerPhase::Answer, 1e-3);
  const std::string text = m.render({});
  const std::string w = "encgraph_worker_seconds_total";
  CHECK(text.find("# TYPE " + w + " counter") != std::string::npos);
  CHECK(value_of(text, w + "{phase=\"prepare\"}") == doctest::Approx(0.75));
  CHECK(value_of(text, w + "{phase=\"execute\"}") == 0);
  CHECK(value_of(text, w + "{phase=\"collect\"}") == doctest::Approx(2.0));
  CHECK(value_of(text, w + "{phase=\"answer\"}") == doctest::Approx(1e-3));
}
