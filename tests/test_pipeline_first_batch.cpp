// The first-batch split end to end on the CPU, through a backend that says
// its staging overlaps replays, with times the test chooses (ModelledTiming):
// the split happens once a staging time is known, the split request's rows
// equal the unsplit ones, and it stays off where it must (the plain CPU
// backend, the switch, eager mode, prefer_faster_path off).
#include "device_backend.hpp"
#include "forwarding_backend.hpp"
#include "graph_manager.hpp"
#include "modelled_timing.hpp"
#include "plugin_instance.hpp"
#include "test_support.hpp"

#include <encgraph/plugin_loader.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

using namespace encgraph;
using namespace encgraph::test;

namespace {

// The CPU backend, claiming that staging overlaps replays.
class OverlappingCpu final : public ForwardingCpuBackend {
 public:
  bool overlaps_staging() const override { return true; }
};

// A toy whose forwards cost 20 ms per 1024 budget tokens (ModelledTiming),
// budgets every 64 tokens up to 1024, and 16 images of 64 tokens: one request
// fills the largest budget exactly.
RuntimeConfig split_config() {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.prefer_faster_path = true;
  for (int64_t b = 64; b <= 1024; b += 64) cfg.budgets.token_budgets.push_back(b);
  cfg.budgets.max_items_per_batch = 16;
  return cfg;
}

struct Setup {
  LoadedPlugin loaded;
  std::shared_ptr<DeviceBackend> backend;
  std::shared_ptr<ModelledTiming> timing = std::make_shared<ModelledTiming>();
  std::shared_ptr<PluginInstance> instance;
  std::unique_ptr<GraphManager> manager;
  std::vector<Item> items;

  Setup(const RuntimeConfig& cfg, std::shared_ptr<DeviceBackend> b) : backend(std::move(b)) {
    PluginRegistry registry(cfg.plugin_dirs);
    loaded = registry.get(cfg.plugin);
    instance =
        std::make_shared<PluginInstance>(loaded, EG_DEVICE_CPU, 0, cfg.weights, cfg.plugin_config);
    timing->ms_per_1k = 20.0;
    manager = std::make_unique<GraphManager>(backend, *instance, cfg, timing);
    manager->capture();
    for (uint64_t s = 0; s < 16; ++s) {
      eg_item_spec spec{};
      eg_item* item = instance->make_item(image(14 * 8, 14 * 8, s + 1), spec);
      items.emplace_back(instance, item, spec);
    }
  }
  ~Setup() { manager.reset(); }
  Result run(ExecuteMode mode = ExecuteMode::Planned) {
    std::vector<const Item*> ptrs;
    for (const auto& i : items) ptrs.push_back(&i);
    return manager->execute(ptrs, mode);
  }
  int64_t batches() const {
    const Stats s = manager->stats();
    return s.batches_graph + s.batches_eager + s.batches_mixed;
  }
};

void check_same_rows(const Result& a, const Result& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a.item_as_float(i), y = b.item_as_float(i);
    REQUIRE(x.size() == y.size());
    REQUIRE_FALSE(x.empty());
    size_t bad = 0;
    for (size_t k = 0; k < x.size(); ++k)
      if (std::isnan(x[k]) || std::fabs(x[k] - y[k]) > 1e-5f) ++bad;
    INFO("item " << i);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("a request's first batch splits once its staging is known, with the same rows") {
  Setup s(split_config(), std::make_shared<OverlappingCpu>());
  REQUIRE(s.timing->longest_ms == 20.0);  // the forwards were calibrated
  // Staging three times the whole batch's replay: hiding most of it behind a
  // head's replay pays.
  s.timing->staging_ms = 3.0 * s.timing->longest_ms;

  const Result first = s.run();  // measures the staging; nothing to weigh yet
  CHECK(s.batches() == 1);
  const Result second = s.run();  // split: a head, then the rest
  CHECK(s.batches() == 3);
  check_same_rows(first, second);
  const Stats st = s.manager->stats();
  CHECK(st.graph_hits == 32);  // both parts replayed graphs: every item a hit
  CHECK(st.batches_graph == 3);

  // A new capture forgets the staging measurement: the next request measures
  // again in one batch, the one after splits again.
  s.manager->capture();
  const int64_t before = s.batches();
  s.run();
  CHECK(s.batches() - before == 1);
  check_same_rows(first, s.run());
  CHECK(s.batches() - before == 3);
}

// Batches of two requests of the 16 items: the first measures the staging
// (`staging_factor` times the longest calibrated forward), the second may
// split. An OverlappingCpu backend unless `plain_cpu`.
int64_t batches_of_two_requests(const RuntimeConfig& cfg, double staging_factor,
                                ExecuteMode second = ExecuteMode::Planned, bool plain_cpu = false) {
  Setup s(cfg, plain_cpu ? make_cpu_backend() : std::make_shared<OverlappingCpu>());
  // The largest budget's modelled forward is 20 ms.
  s.timing->staging_ms = staging_factor * 20.0;
  s.run();
  s.run(second);
  return s.batches();
}

TEST_CASE("no split on the plain CPU backend, with the switch off, or in eager mode") {
  RuntimeConfig cfg = split_config();
  // The control: these inputs do split.
  CHECK(batches_of_two_requests(cfg, 3.0) == 3);
  // The plain CPU backend: its staging never overlaps a replay.
  CHECK(batches_of_two_requests(cfg, 3.0, ExecuteMode::Planned, true) == 2);
  CHECK(batches_of_two_requests(cfg, 3.0, ExecuteMode::Eager) == 2);
  // Staging too short to pay for a second replay.
  CHECK(batches_of_two_requests(cfg, 1e-6) == 2);
  RuntimeConfig off = cfg;
  off.pipeline_first_batch = false;
  CHECK(batches_of_two_requests(off, 3.0) == 2);
  // prefer_faster_path off: batches must not depend on timings.
  RuntimeConfig untimed = cfg;
  untimed.prefer_faster_path = false;
  CHECK(batches_of_two_requests(untimed, 3.0) == 2);
}
