#include "graph_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
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
                           const RuntimeConfig& config, std::shared_ptr<RunTiming> timing)
    : backend_(std::move(backend)),
      timing_(timing ? std::move(timing) : device_timing(backend_)),
      plugin_(plugin),
      config_(config),
      plan_(plugin_, config_),
      geometry_(plugin_, backend_->type()),
      staging_(backend_, plugin_, config_.poison_memory),
      cache_(backend_, plugin_, config_, plan_, geometry_, staging_, *timing_),
      cost_(*timing_, plugin_),
      eager_(backend_, plugin_, config_, geometry_, staging_),
      postprocess_(backend_, plugin_),
      stats_(plugin_.name(), path_names(plan_), path_units(plan_), plan_.budgets().token_budgets,
             config_.stats_log_interval),
      executor_(backend_, *timing_, plugin_, config_,
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
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const auto start = Clock::now();
  cost_.reset();
  executor_.forget_checks();  // they judged the graphs being replaced
  stats_.on_clear();
  // Host wall clock per phase; no synchronisation is added for the sake of
  // timing (see CapturePhases for what each phase includes).
  auto t = Clock::now();
  prepare_device_once();
  const double prepare_s = since(t);
  cache_.capture();
  CapturePhases phases = cache_.phases();
  phases.prepare_device = prepare_s;
  if (config_.prefer_faster_path) {
    t = Clock::now();
    cost_.calibrate(cache_);
    phases.calibrate = since(t);
  }
  const double seconds = since(start);
  phases.other = std::max(0.0, seconds - phases.prepare_device - phases.warmup - phases.capture -
                                   phases.instantiate - phases.calibrate);
  std::vector<int64_t> per_path;
  for (int p = 0; p < plan_.num_paths(); ++p) per_path.push_back(cache_.graphs_of_path(p));
  stats_.on_capture(per_path, static_cast<int64_t>(cache_.memory_bytes()), seconds, phases);
  spdlog::info(
      "captured {} graphs for '{}' on {} in {:.3f} s (prepare_device {:.3f}, warm-up {:.3f}, "
      "capture {:.3f}, instantiate {:.3f}, calibrate {:.3f}{}, other {:.3f}), {:.1f} MiB of "
      "graph memory",
      cache_.graphs().size(), plugin_.name(), backend_->name(), seconds, phases.prepare_device,
      phases.warmup, phases.capture, phases.instantiate, phases.calibrate,
      config_.prefer_faster_path ? fmt::format(": {} replays timed, {} from warm-ups",
                                               cost_.timed_replays(), cost_.estimated_replays())
                                 : std::string(),
      phases.other, static_cast<double>(cache_.memory_bytes()) / 1048576.0);
}

void GraphManager::force_axis_keys(std::optional<std::vector<int64_t>> keys) {
  executor_.force_axis_keys(std::move(keys));
}

void GraphManager::clear() {
  cache_.clear();
  cost_.reset();
  executor_.forget_checks();
  stats_.on_clear();
}

Result GraphManager::execute(const std::vector<const Item*>& items, ExecuteMode mode) {
  if (!items.empty()) prepare_device_once();
  return executor_.execute(items, mode);
}

}  // namespace encgraph
