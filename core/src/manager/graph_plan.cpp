#include "graph_plan.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace encgraph {

GraphKey key_of(const eg_graph_shape& shape) {
  return {shape.path, shape.token_budget,
          std::vector<int64_t>(shape.axis_keys, shape.axis_keys + shape.num_axis_keys)};
}

GraphPlan::GraphPlan(const PluginInstance& plugin, const RuntimeConfig& config)
    : request_(config.budgets) {
  const eg_model_info& info = plugin.info();
  int64_t range_min = 0, range_max = 0;
  plugin.call("budget_range", [&](eg_error* e) {
    return plugin.api()->budget_range(plugin.handle(), &range_min, &range_max, e);
  });
  std::vector<PathBudgetSpec> paths;
  for (int p = 0; p < info.num_paths; ++p) {
    path_names_.push_back(info.paths[p].name ? info.paths[p].name : "path" + std::to_string(p));
    path_units_.push_back(info.path_units[p] ? info.path_units[p] : "tokens");
    paths.push_back(
        {path_names_.back(), info.paths[p].min_token_budget, info.paths[p].allow_zero_tokens != 0});
  }
  if (!(plugin.api()->modalities & EG_MODALITY_VIDEO)) request_.video_enabled = false;
  // Capture-axis key combinations, counted before planning so that the plan's
  // graph bound (limits.max_graphs) covers them before anything is built.
  int64_t combinations = 1;
  for (int a = 0; a < info.num_capture_axes; ++a)
    combinations = combinations > int64_t{1} << 32 ? combinations
                                                   : combinations * info.capture_axes[a].num_keys;
  plan_ =
      plan_budgets(request_, range_min, range_max, info.max_frames_per_video, paths, combinations);

  axis_key_product_ = {{}};
  for (int a = 0; a < info.num_capture_axes; ++a) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : axis_key_product_)
      for (int k = 0; k < info.capture_axes[a].num_keys; ++k) {
        auto keys = prefix;
        keys.push_back(info.capture_axes[a].keys[k]);
        next.push_back(std::move(keys));
      }
    axis_key_product_ = std::move(next);
  }

  std::string budgets;
  for (size_t p = 0; p < plan_.path_budgets.size(); ++p) {
    budgets += (p ? "; " : "") + path_names_[p] + ": [";
    for (size_t i = 0; i < plan_.path_budgets[p].size(); ++i)
      budgets += (i ? ", " : "") + std::to_string(plan_.path_budgets[p][i]);
    budgets += "] " + path_units_[p];
  }
  spdlog::info(
      "graph manager for '{}': budgets {}, max_items_per_batch={}, "
      "max_frames_per_batch={}, capture axes={}",
      plugin.name(), budgets, plan_.max_batch_size, plan_.max_frames_per_batch,
      info.num_capture_axes);
}

eg_graph_shape GraphPlan::shape(int32_t path, int64_t budget, const std::vector<int64_t>& keys,
                                int64_t frames) const {
  eg_graph_shape s{};
  s.path = path;
  s.token_budget = budget;
  s.max_batch_size = plan_.max_batch_size;
  s.max_frames_per_batch = frames > 0 ? frames : plan_.max_frames_per_batch;
  s.num_axis_keys = static_cast<int32_t>(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) s.axis_keys[i] = keys[i];
  return s;
}

std::vector<eg_graph_shape> GraphPlan::planned_graphs() const {
  std::vector<eg_graph_shape> shapes;
  for (size_t p = 0; p < plan_.path_budgets.size(); ++p) {
    std::vector<int64_t> budgets = plan_.path_budgets[p];
    std::sort(budgets.rbegin(), budgets.rend());  // largest first
    for (int64_t b : budgets) {
      if (b == 0) continue;
      for (const auto& keys : axis_key_product_)
        shapes.push_back(shape(static_cast<int32_t>(p), b, keys));
    }
  }
  return shapes;
}

std::string GraphPlan::graph_count_factors() const {
  return encgraph::graph_count_factors(plan_, request_,
                                       static_cast<int64_t>(axis_key_product_.size()));
}

int64_t path_tokens_of(const PluginInstance& plugin, const eg_item_spec& spec, int p) {
  if (!plugin.writes_path_tokens() && plugin.info().num_paths == 1) return spec.output_tokens;
  return spec.path_tokens[p];
}

}  // namespace encgraph
