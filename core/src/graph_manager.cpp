#include "graph_manager.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace encgraph {
namespace {

std::vector<std::string> path_names(const GraphPlan& plan) {
  std::vector<std::string> out;
  for (int p = 0; p < plan.num_paths(); ++p) out.push_back(plan.path_name(p));
  return out;
}

std::vector<std::string> path_units(const GraphPlan& plan) {
  std::vector<std::string> out;
  for (int p = 0; p < plan.num_paths(); ++p) out.push_back(plan.path_unit(p));
  return out;
}

}  // namespace

GraphManager::GraphManager(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
                           const RuntimeConfig& config)
    : backend_(std::move(backend)),
      plugin_(plugin),
      config_(config),
      plan_(plugin_, config_),
      geometry_(plugin_, backend_->type()),
      staging_(backend_, plugin_, config_.poison_memory),
      cache_(backend_, plugin_, config_, plan_, geometry_, staging_),
      cost_(backend_, plugin_),
      eager_(backend_, plugin_, config_, geometry_, staging_),
      postprocess_(backend_, plugin_),
      stats_(plugin_.name(), path_names(plan_), path_units(plan_), plan_.budgets().token_budgets,
             config_.stats_log_interval),
      executor_(backend_, plugin_, config_,
                BatchExecutor::Parts{plan_, cache_, cost_, eager_, postprocess_, stats_}) {}

GraphManager::~GraphManager() {
  try {
    clear();
  } catch (const std::exception& e) {
    spdlog::error("releasing graphs: {}", e.what());
  }
}

void GraphManager::prepare_device_once() {
  if (device_prepared_) return;
  if (plugin_.api()->prepare_device)
    plugin_.call("prepare_device", [&](eg_error* e) {
      return plugin_.api()->prepare_device(plugin_.handle(), backend_->stream(), e);
    });
  device_prepared_ = true;
}

void GraphManager::capture() {
  const auto start = std::chrono::steady_clock::now();
  cost_.reset();
  stats_.on_clear();
  prepare_device_once();
  cache_.capture();
  if (config_.prefer_faster_path) cost_.calibrate(cache_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<int64_t> per_path;
  for (int p = 0; p < plan_.num_paths(); ++p) per_path.push_back(cache_.graphs_of_path(p));
  stats_.on_capture(per_path, static_cast<int64_t>(cache_.memory_bytes()), seconds);
  spdlog::info("captured {} graphs for '{}' on {} in {:.3f} s, {:.1f} MiB of graph memory",
               cache_.graphs().size(), plugin_.name(), backend_->name(), seconds,
               static_cast<double>(cache_.memory_bytes()) / 1048576.0);
}

void GraphManager::clear() {
  cache_.clear();
  cost_.reset();
  stats_.on_clear();
}

Result GraphManager::execute(const std::vector<const Item*>& items, ExecuteMode mode) {
  if (!items.empty()) prepare_device_once();
  return executor_.execute(items, mode);
}

}  // namespace encgraph
