// Plan and axes: the budgets a plugin's graphs are captured at (one list per
// path, in that path's unit), the capture axes' key combinations, the graph
// geometries (eg_graph_shape) built from them, and what each item sends
// through each path.
#pragma once

#include "../plugin_instance.hpp"

#include <encgraph/budget_plan.hpp>
#include <encgraph/runtime_config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace encgraph {

// Names one graph: path, budget and capture-axis keys.
struct GraphKey {
  int32_t path = 0;
  int64_t budget = 0;
  std::vector<int64_t> axis_keys;
  bool operator<(const GraphKey& o) const {
    if (path != o.path) return path < o.path;
    if (budget != o.budget) return budget < o.budget;
    return axis_keys < o.axis_keys;
  }
};

GraphKey key_of(const eg_graph_shape& shape);

class GraphPlan {
 public:
  // Plans the budgets; throws Config naming the setting when the request is invalid.
  GraphPlan(const PluginInstance& plugin, const RuntimeConfig& config);

  const BudgetPlan& budgets() const { return plan_; }
  // The cartesian product of the capture axes' keys (one empty tuple without axes).
  const std::vector<std::vector<int64_t>>& axis_key_product() const { return axis_key_product_; }
  int num_paths() const { return static_cast<int>(plan_.path_budgets.size()); }
  const std::string& path_name(int p) const { return path_names_.at(p); }
  const std::string& path_unit(int p) const { return path_units_.at(p); }

  // A graph (or an eager run) of `budget` tokens on `path` under the plan's batch
  // limits; frames > 0 replaces the plan's max_frames_per_batch (an item with
  // more frames than the plan allows runs eagerly at its own count).
  eg_graph_shape shape(int32_t path, int64_t budget, const std::vector<int64_t>& axis_keys,
                       int64_t frames = 0) const;
  // Every graph the plan asks for, in capture order (largest budgets first).
  std::vector<eg_graph_shape> planned_graphs() const;
  // "2 budgets x 33 capture-axis key combinations": why there are so many graphs.
  std::string graph_count_factors() const;

 private:
  BudgetPlan plan_;
  BudgetRequest request_;
  std::vector<std::vector<int64_t>> axis_key_product_;
  std::vector<std::string> path_names_;
  std::vector<std::string> path_units_;
};

// What `spec`'s item sends through path p, in the path's unit: path_tokens[p]
// for a plugin that writes them (1.1, and any plugin with several paths),
// output_tokens for a 1.0 plugin's single path.
int64_t path_tokens_of(const PluginInstance& plugin, const eg_item_spec& spec, int p);

}  // namespace encgraph
