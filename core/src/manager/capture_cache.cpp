#include "capture_cache.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace encgraph {
namespace {

constexpr size_t kGraphCountWarning = 64;

}  // namespace

CaptureCache::CaptureCache(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
                           const RuntimeConfig& config, const GraphPlan& plan,
                           const GraphGeometry& geometry, Staging& staging, RunTiming& timing)
    : backend_(std::move(backend)),
      plugin_(plugin),
      config_(config),
      plan_(plan),
      geometry_(geometry),
      staging_(staging),
      timing_(timing) {
  const size_t paths = static_cast<size_t>(plan_.num_paths());
  const size_t outputs = static_cast<size_t>(geometry_.num_outputs());
  arena_.assign(paths, std::vector<void*>(outputs, nullptr));
  arena_bytes_.assign(paths, std::vector<size_t>(outputs, 0));
  packing_budgets_ = plan_.budgets().path_budgets;
}

CaptureCache::~CaptureCache() {
  release_memory();
}

CapturedGraph* CaptureCache::find(const GraphKey& key) {
  auto it = graphs_.find(key);
  return it == graphs_.end() ? nullptr : &it->second;
}
const CapturedGraph* CaptureCache::find(const GraphKey& key) const {
  auto it = graphs_.find(key);
  return it == graphs_.end() ? nullptr : &it->second;
}

int64_t CaptureCache::graphs_of_path(int path) const {
  int64_t n = 0;
  for (const auto& [key, g] : graphs_) n += key.path == path ? 1 : 0;
  return n;
}

void CaptureCache::release_memory() {
  for (auto& [key, g] : graphs_) backend_->free(g.buffer_memory);
  graphs_.clear();
  for (auto& path : arena_)
    for (auto& arena : path) {
      backend_->free(arena);
      arena = nullptr;
    }
  for (auto& path : arena_bytes_) std::fill(path.begin(), path.end(), 0);
  backend_->free(workspace_);
  backend_->release_uploads();
  backend_->free_host(host_staging_[0]);
  backend_->free_host(host_staging_[1]);
  workspace_ = host_staging_[0] = host_staging_[1] = nullptr;
  workspace_bytes_ = graph_memory_ = staging_bytes_ = 0;
}

void CaptureCache::clear() {
  backend_->synchronize();
  release_memory();
  captured_ = false;
  packing_budgets_ = plan_.budgets().path_budgets;
}

bool CaptureCache::allocate_shared(std::vector<eg_graph_shape>& shapes) {
  size_t ws = 0, staging = 0;
  std::vector<std::vector<size_t>> out = arena_bytes_;
  for (auto& path : out) std::fill(path.begin(), path.end(), 0);
  for (const auto& s : shapes) {
    ws = std::max(ws, geometry_.workspace_bytes(s));
    const std::vector<eg_tensor> outputs = geometry_.outputs(s);
    for (size_t o = 0; o < outputs.size(); ++o)
      out[s.path][o] = std::max(out[s.path][o], tensor_bytes(outputs[o]));
    staging = std::max(staging, geometry_.buffers(s).bytes);
  }
  try {
    workspace_ = backend_->alloc(ws, "the shared graph workspace");
    workspace_bytes_ = ws;
    graph_memory_ = ws;
    const auto& names = plugin_.outputs();
    for (size_t p = 0; p < out.size(); ++p)
      for (size_t o = 0; o < out[p].size(); ++o) {
        arena_[p][o] = backend_->alloc(out[p][o], "the shared graph output '" + names[o].name +
                                                      "' of path " + std::to_string(p));
        arena_bytes_[p][o] = out[p][o];
        graph_memory_ += out[p][o];
      }
    host_staging_[0] = backend_->alloc_host(staging, "replay staging");
    host_staging_[1] = backend_->alloc_host(staging, "replay staging");
    staging_bytes_ = staging;
    return true;
  } catch (const Error& e) {
    release_memory();
    if (e.kind() != ErrorKind::Device || !config_.drop_budget_on_oom) throw;
    int64_t largest = 0;
    for (const auto& s : shapes) largest = std::max(largest, s.token_budget);
    spdlog::warn("dropping budget {}: {}", largest, e.what());
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                [&](const eg_graph_shape& s) { return s.token_budget == largest; }),
                 shapes.end());
    return false;
  }
}

void CaptureCache::capture() {
  if (captured_) clear();
  phases_ = CapturePhases{};
  std::vector<eg_graph_shape> shapes = plan_.planned_graphs();
  if (shapes.size() > kGraphCountWarning)
    spdlog::warn("capturing {} graphs for '{}': {}; each costs capture time and memory",
                 shapes.size(), plugin_.name(), plan_.graph_count_factors());

  try {
    // Shared memory: every graph writes its outputs and scratch into one arena
    // each, sized for the largest graph.
    while (!shapes.empty() && !allocate_shared(shapes)) {
    }
    for (const auto& shape : shapes) {
      try {
        capture_one(shape);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Device || !config_.drop_budget_on_oom) throw;
        spdlog::warn("dropping graph {} of '{}': {}", describe_shape(shape), plugin_.name(),
                     e.what());
      }
    }
    backend_->synchronize();
    // Device mirrors of the staging slots (uploads that overlap the replay
    // before them), last: they never take memory a budget needs, and without
    // room for them copies run in line.
    backend_->reserve_uploads(staging_bytes_);
    graph_memory_ += backend_->upload_reserve_bytes();
  } catch (...) {
    release_memory();
    throw;
  }
  captured_ = true;
  // Pack against what was captured: a dropped budget must not attract batches.
  for (size_t p = 0; p < packing_budgets_.size(); ++p) {
    auto& budgets = packing_budgets_[p];
    budgets.erase(std::remove_if(budgets.begin(), budgets.end(),
                                 [&](int64_t b) {
                                   if (b == 0) return false;
                                   for (const auto& [key, g] : graphs_)
                                     if (key.path == static_cast<int32_t>(p) && key.budget == b)
                                       return false;
                                   return true;
                                 }),
                  budgets.end());
  }
}

void CaptureCache::capture_one(const eg_graph_shape& shape) {
  const GraphKey key = key_of(shape);
  BufferBlock block = geometry_.buffers(shape);
  void* memory =
      backend_->alloc(block.bytes, "the input buffers of graph " + describe_shape(shape));
  graph_memory_ += block.bytes;
  CapturedGraph& c = graphs_[key];
  c.shape = shape;
  c.buffer_memory = memory;
  block.place(memory);
  c.buffers = std::move(block.buffers);
  c.outputs = geometry_.outputs(shape);
  for (size_t o = 0; o < c.outputs.size(); ++o) c.outputs[o].data = arena_[shape.path][o];
  c.args.shape = c.shape;
  c.args.buffers = c.buffers.data();
  c.args.num_buffers = static_cast<int32_t>(c.buffers.size());
  c.args.struct_size = sizeof(eg_forward_args);
  c.args.output = c.outputs[0];
  c.args.workspace = workspace_;
  c.args.workspace_size = workspace_bytes_;
  c.args.stream = backend_->stream();
  c.args.outputs = c.outputs.data();  // the map node is stable
  c.args.num_outputs = static_cast<int32_t>(c.outputs.size());
  try {
    staging_.fill_capture(c.shape, c.buffers, host_staging_[0]);
    const eg_forward_args* args = &c.args;
    PluginInstance* plugin = &plugin_;
    auto forward = [plugin, args] {
      plugin->call("forward", &args->shape,
                   [&](eg_error* e) { return plugin->api()->forward(plugin->handle(), args, e); });
    };
    // Warm-up outside the capture: lazy initialisation (GEMM tuning) happens
    // here. Timed on the device up to the sync that was already there (the
    // cost model may take it for the replay's time) and on the host clock
    // (the capture phases).
    const auto warmup_start = std::chrono::steady_clock::now();
    c.warmup_ms = timing_.time_ms({TimedWork::Warmup, c.shape}, forward);
    phases_.warmup +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_start).count();
    DeviceBackend::CaptureTimes times;
    c.graph = backend_->capture(
        forward, "graph " + describe_shape(shape) + " of '" + plugin_.name() + "'", &times);
    phases_.capture += times.record_s;
    phases_.instantiate += times.instantiate_s;
  } catch (...) {
    backend_->free(memory);
    graph_memory_ -= block.bytes;
    graphs_.erase(key);
    throw;
  }
}

void CaptureCache::replay(CapturedGraph& g, const std::vector<const eg_item*>& items,
                          StreamTimer* staging_timer) {
  const int slot = static_cast<int>(staging_turn_++ & 1);
  // Host staging (the plugin's copies into pinned memory, the padding, the
  // uploads queued) is on a request's path before its first replay can start:
  // the debug log shows it beside the graph's device time.
  const bool log = spdlog::should_log(spdlog::level::debug);
  const auto staging_start =
      log ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (staging_timer) staging_timer->start();
  staging_.fill_replay(g.shape, g.buffers, items, host_staging_[slot], slot);
  if (staging_timer) staging_timer->stop();
  if (log)
    spdlog::debug(
        "'{}': replay of budget {} ({} items): host staging {:.3f} ms, replay {:.3f} ms",
        plugin_.name(), g.shape.token_budget, items.size(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - staging_start)
            .count(),
        g.replay_ms);
  if (config_.poison_memory) {  // NaN in every float format: stale rows must not leak
    for (size_t o = 0; o < arena_[g.shape.path].size(); ++o)
      backend_->fill_bytes(arena_[g.shape.path][o], 0xFF, arena_bytes_[g.shape.path][o]);
    backend_->fill_bytes(workspace_, 0xFF, workspace_bytes_);
  }
  g.graph->replay();
}

}  // namespace encgraph
