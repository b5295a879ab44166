// The budget-graph manager, as Runtime sees it: a thin façade over the units in
// manager/ (plan and axes, graph geometry, staging and padding, capture cache,
// cost model, eager runner, post-processing, batch executor, statistics).
#pragma once

#include "device_backend.hpp"
#include "manager/batch_executor.hpp"
#include "manager/capture_cache.hpp"
#include "manager/cost_model.hpp"
#include "manager/eager_runner.hpp"
#include "manager/graph_geometry.hpp"
#include "manager/graph_plan.hpp"
#include "manager/graph_stats.hpp"
#include "manager/postprocess.hpp"
#include "manager/run_timing.hpp"
#include "manager/staging.hpp"
#include "plugin_instance.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/runtime_config.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph {

class GraphManager {
 public:
  // `timing`: where the cost model's times come from; null: the backend's
  // (tests pass times they choose, see run_timing.hpp).
  GraphManager(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
               const RuntimeConfig& config, std::shared_ptr<RunTiming> timing = nullptr);
  ~GraphManager();
  GraphManager(const GraphManager&) = delete;
  GraphManager& operator=(const GraphManager&) = delete;

  void capture();
  bool is_captured() const { return cache_.captured(); }
  void clear();
  Result execute(const std::vector<const Item*>& items, ExecuteMode mode = ExecuteMode::Planned);
  Stats stats() const { return stats_.snapshot(); }
  const BudgetPlan& plan() const { return plan_.budgets(); }
  // Graph keys the plan asks for, in capture order.
  std::vector<eg_graph_shape> planned_graphs() const { return plan_.planned_graphs(); }
  // Diagnosis: pad `buffer` with `logic` from the next execute on.
  void override_padding(const std::string& buffer, eg_padding_logic logic) {
    staging_.override_padding(buffer, logic);
  }
  void clear_padding_overrides() { staging_.clear_padding_overrides(); }
  // Diagnosis: every batch runs under `keys` (nullopt: the plugin's choice).
  void force_axis_keys(std::optional<std::vector<int64_t>> keys);

 private:
  void prepare_device_once();

  std::shared_ptr<DeviceBackend> backend_;
  std::shared_ptr<RunTiming> timing_;
  PluginInstance& plugin_;
  RuntimeConfig config_;
  // Declared in dependency order: each unit refers to the ones above it.
  GraphPlan plan_;
  GraphGeometry geometry_;
  Staging staging_;
  CaptureCache cache_;
  CostModel cost_;
  EagerRunner eager_;
  Postprocessor postprocess_;
  StatsRecorder stats_;
  BatchExecutor executor_;
  bool device_prepared_ = false;  // the plugin's prepare_device ran
};

}  // namespace encgraph
