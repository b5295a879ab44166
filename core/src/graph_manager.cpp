#include "graph_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

namespace encgraph {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kGraphCountWarning = 64;

size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

size_t tensor_bytes(const eg_tensor& t) {
  size_t n = dtype_size(t.dtype);
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

}  // namespace

GraphManager::GraphManager(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
                           const RuntimeConfig& config)
    : backend_(std::move(backend)), plugin_(plugin), config_(config) {
  const eg_model_info& info = plugin_.info();
  int64_t range_min = 0, range_max = 0;
  plugin_.call("budget_range", [&](eg_error* e) {
    return plugin_.api()->budget_range(plugin_.handle(), &range_min, &range_max, e);
  });
  std::vector<PathBudgetSpec> paths;
  for (int p = 0; p < info.num_paths; ++p)
    paths.push_back({info.paths[p].name ? info.paths[p].name : "path" + std::to_string(p),
                     info.paths[p].min_token_budget, info.paths[p].allow_zero_tokens != 0});
  BudgetRequest request = config_.budgets;
  if (!(plugin_.api()->modalities & EG_MODALITY_VIDEO)) request.video_enabled = false;
  // Capture-axis key combinations, counted before planning so that the plan's
  // graph bound (limits.max_graphs) covers them before anything is built.
  int64_t combinations = 1;
  for (int a = 0; a < info.num_capture_axes; ++a)
    combinations = combinations > int64_t{1} << 32 ? combinations
                                                   : combinations * info.capture_axes[a].num_keys;
  plan_ =
      plan_budgets(request, range_min, range_max, info.max_frames_per_video, paths, combinations);

  // The cartesian product of the capture axes' keys (one empty tuple without axes).
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
  eager_scratch_.resize(info.num_paths);
  output_arena_.assign(info.num_paths, nullptr);
  output_arena_bytes_.assign(info.num_paths, 0);
  packing_budgets_ = plan_.path_budgets;
  stats_.token_budgets = plan_.token_budgets;
  std::string budgets;
  for (size_t p = 0; p < plan_.path_budgets.size(); ++p) {
    budgets += (p ? "; " : "") + paths[p].name + ": [";
    for (size_t i = 0; i < plan_.path_budgets[p].size(); ++i)
      budgets += (i ? ", " : "") + std::to_string(plan_.path_budgets[p][i]);
    budgets += "]";
  }
  spdlog::info(
      "graph manager for '{}': budgets {}, max_items_per_batch={}, "
      "max_frames_per_batch={}, capture axes={}",
      plugin_.name(), budgets, plan_.max_batch_size, plan_.max_frames_per_batch,
      info.num_capture_axes);
}

GraphManager::~GraphManager() {
  try {
    clear();
  } catch (const std::exception& e) {
    spdlog::error("releasing graphs: {}", e.what());
  }
  for (auto& s : eager_scratch_) {
    backend_->free(s.memory);
    backend_->free_host(s.host);
  }
}

eg_graph_shape GraphManager::make_shape(int32_t path, int64_t budget,
                                        const std::vector<int64_t>& keys) const {
  eg_graph_shape s{};
  s.path = path;
  s.token_budget = budget;
  s.max_batch_size = plan_.max_batch_size;
  s.max_frames_per_batch = plan_.max_frames_per_batch;
  s.num_axis_keys = static_cast<int32_t>(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) s.axis_keys[i] = keys[i];
  return s;
}

std::vector<eg_graph_shape> GraphManager::planned_graphs() const {
  std::vector<eg_graph_shape> shapes;
  for (size_t p = 0; p < plan_.path_budgets.size(); ++p) {
    std::vector<int64_t> budgets = plan_.path_budgets[p];
    std::sort(budgets.rbegin(), budgets.rend());  // largest first
    for (int64_t b : budgets) {
      if (b == 0) continue;
      for (const auto& keys : axis_key_product_)
        shapes.push_back(make_shape(static_cast<int32_t>(p), b, keys));
    }
  }
  return shapes;
}

std::vector<eg_tensor> GraphManager::buffer_layout(const eg_graph_shape& shape,
                                                   size_t* total_bytes) const {
  const eg_model_info& info = plugin_.info();
  std::vector<eg_tensor> out(info.num_buffers);
  size_t offset = 0;
  for (int b = 0; b < info.num_buffers; ++b) {
    eg_tensor t{};
    plugin_.call("buffer_shape", [&](eg_error* e) {
      return plugin_.api()->buffer_shape(plugin_.handle(), &shape, b, &t, e);
    });
    if (t.ndim < 0 || t.ndim > EG_MAX_DIMS)
      throw_plugin("plugin '" + plugin_.name() + "': buffer_shape gave " + std::to_string(t.ndim) +
                   " dimensions for buffer '" + info.buffers[b].name + "'");
    for (int d = 0; d < t.ndim; ++d)
      if (t.shape[d] < 0)
        throw_plugin("plugin '" + plugin_.name() + "': negative extent for buffer '" +
                     info.buffers[b].name + "'");
    t.dtype = info.buffers[b].dtype;
    t.device = backend_->type();
    t.data = reinterpret_cast<void*>(offset);  // relative until placed
    offset += align_up(tensor_bytes(t));
    out[b] = t;
  }
  *total_bytes = offset;
  return out;
}

eg_tensor GraphManager::output_layout(const eg_graph_shape& shape) const {
  eg_tensor t{};
  plugin_.call("output_shape", [&](eg_error* e) {
    return plugin_.api()->output_shape(plugin_.handle(), &shape, &t, e);
  });
  if (t.ndim != 2 || t.shape[1] != plugin_.info().out_hidden_size || t.shape[0] < 0)
    throw_plugin(
        "plugin '" + plugin_.name() + "': output_shape for " + describe_shape(shape) +
        " must be [rows, out_hidden_size=" + std::to_string(plugin_.info().out_hidden_size) + "]");
  t.dtype = plugin_.info().out_dtype;
  t.device = backend_->type();
  return t;
}

size_t GraphManager::workspace_bytes(const eg_graph_shape& shape) const {
  size_t bytes = 0;
  plugin_.call("workspace_size", [&](eg_error* e) {
    return plugin_.api()->workspace_size(plugin_.handle(), &shape, &bytes, e);
  });
  return bytes;
}

void GraphManager::release_memory() {
  for (auto& [key, g] : graphs_) backend_->free(g.buffer_memory);
  graphs_.clear();
  for (auto& arena : output_arena_) backend_->free(arena);
  std::fill(output_arena_.begin(), output_arena_.end(), nullptr);
  std::fill(output_arena_bytes_.begin(), output_arena_bytes_.end(), 0);
  backend_->free(workspace_);
  backend_->free_host(staging_[0]);
  backend_->free_host(staging_[1]);
  workspace_ = staging_[0] = staging_[1] = nullptr;
  workspace_bytes_ = graph_memory_ = 0;
}

void GraphManager::clear() {
  backend_->synchronize();
  release_memory();
  captured_ = false;
  eager_overhead_ms_.clear();
  packing_budgets_ = plan_.path_budgets;
  stats_.num_graphs = 0;
  stats_.graph_memory_bytes = 0;
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
  if (captured_) clear();
  const auto start = std::chrono::steady_clock::now();
  std::vector<eg_graph_shape> shapes = planned_graphs();
  if (shapes.size() > kGraphCountWarning)
    spdlog::warn("capturing {} graphs for '{}': {}; each costs capture time and memory",
                 shapes.size(), plugin_.name(),
                 graph_count_factors(plan_, config_.budgets,
                                     static_cast<int64_t>(axis_key_product_.size())));

  prepare_device_once();

  // Shared memory: every graph writes its output and scratch into one arena each,
  // sized for the largest graph; graphs never run at the same time.
  while (!shapes.empty()) {
    size_t ws = 0, staging = 0;
    std::vector<size_t> out(output_arena_.size(), 0);
    for (const auto& s : shapes) {
      ws = std::max(ws, workspace_bytes(s));
      out[s.path] = std::max(out[s.path], tensor_bytes(output_layout(s)));
      size_t b = 0;
      buffer_layout(s, &b);
      staging = std::max(staging, b);
    }
    try {
      workspace_ = backend_->alloc(ws, "the shared graph workspace");
      workspace_bytes_ = ws;
      graph_memory_ = ws;
      for (size_t p = 0; p < out.size(); ++p) {
        output_arena_[p] =
            backend_->alloc(out[p], "the shared graph output of path " + std::to_string(p));
        output_arena_bytes_[p] = out[p];
        graph_memory_ += out[p];
      }
      staging_[0] = backend_->alloc_host(staging, "replay staging");
      staging_[1] = backend_->alloc_host(staging, "replay staging");
      break;
    } catch (const Error& e) {
      release_memory();
      if (e.kind() != ErrorKind::Device || !config_.drop_budget_on_oom) throw;
      int64_t largest = 0;
      for (const auto& s : shapes) largest = std::max(largest, s.token_budget);
      spdlog::warn("dropping budget {}: {}", largest, e.what());
      shapes.erase(
          std::remove_if(shapes.begin(), shapes.end(),
                         [&](const eg_graph_shape& s) { return s.token_budget == largest; }),
          shapes.end());
    }
  }

  for (const auto& shape : shapes) {
    try {
      capture_one(shape);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Device || !config_.drop_budget_on_oom) {
        release_memory();
        throw;
      }
      spdlog::warn("dropping graph {} of '{}': {}", describe_shape(shape), plugin_.name(),
                   e.what());
    }
  }
  backend_->synchronize();
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
  stats_.num_graphs = static_cast<int64_t>(graphs_.size());
  if (config_.prefer_faster_path) calibrate();
  stats_.capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.graph_memory_bytes = static_cast<int64_t>(graph_memory_);
  spdlog::info("captured {} graphs for '{}' on {} in {:.3f} s, {:.1f} MiB of graph memory",
               graphs_.size(), plugin_.name(), backend_->name(), stats_.capture_seconds,
               stats_.graph_memory_bytes / 1048576.0);
}

void GraphManager::calibrate() {
  eager_overhead_ms_.assign(plugin_.info().num_paths, 0.0);
  std::vector<int64_t> smallest(plugin_.info().num_paths, 0);
  for (auto& [key, g] : graphs_) {
    g.graph->replay();  // warm
    double t[3];
    for (double& v : t) v = backend_->time_ms([&] { g.graph->replay(); });
    std::sort(t, t + 3);
    g.replay_ms = t[1];
    if (smallest[key.path] == 0 || key.budget < smallest[key.path]) smallest[key.path] = key.budget;
  }
  // Eager costs the same kernels plus launch gaps: time the forward called
  // directly on the smallest graph's own buffers.
  for (auto& [key, g] : graphs_) {
    if (key.budget != smallest[key.path]) continue;
    auto fn = plugin_.api()->forward_eager ? plugin_.api()->forward_eager : plugin_.api()->forward;
    double t[3];
    for (double& v : t)
      v = backend_->time_ms([&] {
        plugin_.call("eager forward (calibration)", &g.shape,
                     [&](eg_error* e) { return fn(plugin_.handle(), &g.args, e); });
      });
    std::sort(t, t + 3);
    eager_overhead_ms_[key.path] = std::max(0.0, t[1] - g.replay_ms);
  }
}

bool GraphManager::eager_expected_faster(const Captured& graph, int64_t tokens) const {
  // Replay times of this path's graphs with the same axis keys, by budget.
  std::vector<std::pair<int64_t, double>> times;
  for (const auto& [key, g] : graphs_)
    if (key.path == graph.shape.path &&
        std::equal(key.axis_keys.begin(), key.axis_keys.end(), graph.shape.axis_keys))
      times.emplace_back(key.budget, g.replay_ms);
  if (times.size() < 2) return false;
  std::sort(times.begin(), times.end());
  double estimate = times.front().second;
  for (size_t i = 1; i < times.size(); ++i) {
    if (tokens <= times[i].first) {
      const auto [b0, t0] = times[i - 1];
      const auto [b1, t1] = times[i];
      estimate = tokens <= b0 ? t0 : t0 + (t1 - t0) * double(tokens - b0) / double(b1 - b0);
      break;
    }
  }
  estimate += eager_overhead_ms_.empty() ? 0.0 : eager_overhead_ms_[graph.shape.path];
  // A clear margin: eager also pays buffer preparation the replay does not.
  return estimate < 0.8 * graph.replay_ms;
}

void GraphManager::capture_one(const eg_graph_shape& shape) {
  GraphKey key{shape.path, shape.token_budget,
               std::vector<int64_t>(shape.axis_keys, shape.axis_keys + shape.num_axis_keys)};
  size_t bytes = 0;
  std::vector<eg_tensor> layout = buffer_layout(shape, &bytes);
  void* memory = backend_->alloc(bytes, "the input buffers of graph " + describe_shape(shape));
  graph_memory_ += bytes;
  Captured& c = graphs_[key];
  c.shape = shape;
  c.buffer_memory = memory;
  c.buffers = std::move(layout);
  for (auto& t : c.buffers)
    t.data = static_cast<char*>(memory) + reinterpret_cast<uintptr_t>(t.data);
  c.output = output_layout(shape);
  c.output.data = output_arena_[shape.path];
  c.args.shape = c.shape;
  c.args.buffers = c.buffers.data();
  c.args.num_buffers = static_cast<int32_t>(c.buffers.size());
  c.args.output = c.output;
  c.args.workspace = workspace_;
  c.args.workspace_size = workspace_bytes_;
  c.args.stream = backend_->stream();
  try {
    plugin_.call("prepare_capture_inputs", &shape, [&](eg_error* e) {
      return plugin_.api()->prepare_capture_inputs(plugin_.handle(), &c.shape, c.buffers.data(),
                                                   c.args.num_buffers, backend_->stream(), e);
    });
    const eg_forward_args* args = &c.args;  // the map node is stable
    PluginInstance* plugin = &plugin_;
    auto forward = [plugin, args] {
      plugin->call("forward", &args->shape,
                   [&](eg_error* e) { return plugin->api()->forward(plugin->handle(), args, e); });
    };
    forward();  // warm-up outside the capture: lazy initialisation happens here
    backend_->synchronize();
    c.graph = backend_->capture(forward,
                                "graph " + describe_shape(shape) + " of '" + plugin_.name() + "'");
  } catch (...) {
    backend_->free(memory);
    graph_memory_ -= bytes;
    graphs_.erase(key);
    throw;
  }
}

void GraphManager::fill_buffers(const eg_graph_shape& shape,
                                const std::vector<eg_tensor>& device_buffers,
                                const std::vector<const eg_item*>& items, void* staging_base,
                                int slot) {
  const eg_model_info& info = plugin_.info();
  const int nb = static_cast<int>(device_buffers.size());
  if (nb == 0) return;
  if (slot >= 0) backend_->wait_staging_free(slot);
  // Staging mirrors the device layout byte for byte, so one copy can move
  // several buffers at once.
  char* const device_base = static_cast<char*>(device_buffers[0].data);
  char* const host_base = static_cast<char*>(staging_base);
  eg_replay_buffer replay[EG_MAX_BUFFERS];
  for (int b = 0; b < nb; ++b) {
    replay[b].staging = device_buffers[b];
    replay[b].staging.device = EG_DEVICE_CPU;
    replay[b].staging.data = host_base + (static_cast<char*>(device_buffers[b].data) - device_base);
    replay[b].rows = -1;
  }
  plugin_.call("prepare_replay_buffers", &shape, [&](eg_error* e) {
    return plugin_.api()->prepare_replay_buffers(plugin_.handle(), &shape, items.data(),
                                                 static_cast<int64_t>(items.size()), replay, nb, e);
  });

  // Padding is done on the host when it is small (it then rides along in the
  // copy) and on the device when large (a memset instead of moving zeros).
  constexpr size_t kHostPadLimit = 64 * 1024;
  struct Span {
    size_t offset, bytes;
  };
  Span copies[EG_MAX_BUFFERS];
  Span zero_fills[EG_MAX_BUFFERS];
  int callbacks[EG_MAX_BUFFERS];
  int64_t callback_rows[EG_MAX_BUFFERS];
  int num_copies = 0, num_fills = 0, num_callbacks = 0;
  for (int b = 0; b < nb; ++b) {
    const int64_t rows = replay[b].rows;
    if (rows < 0) continue;  // keeps its captured contents
    const eg_tensor& dst = device_buffers[b];
    char* host = static_cast<char*>(replay[b].staging.data);
    const size_t offset = static_cast<size_t>(host - host_base);
    const size_t total = tensor_bytes(dst);
    if (dst.ndim == 0) {
      copies[num_copies++] = {offset, total};
      continue;
    }
    const int64_t capacity = dst.shape[0];
    if (rows > capacity)
      throw Error(ErrorKind::Plugin, "plugin '" + plugin_.name() + "' wrote " +
                                         std::to_string(rows) + " rows into buffer '" +
                                         info.buffers[b].name + "' of " + std::to_string(capacity) +
                                         " rows for " + describe_shape(shape));
    if (capacity == 0) continue;
    const size_t row_bytes = total / static_cast<size_t>(capacity);
    const size_t real = static_cast<size_t>(rows) * row_bytes;
    switch (info.buffers[b].padding_logic) {
      case EG_PAD_REPEAT_LAST:
        if (rows == 0) {
          std::memset(host, 0, total);
        } else {
          for (int64_t r = rows; r < capacity; ++r)
            std::memcpy(host + r * row_bytes, host + (rows - 1) * row_bytes, row_bytes);
        }
        copies[num_copies++] = {offset, total};
        break;
      case EG_PAD_CALLBACK:
        copies[num_copies++] = {offset, real};
        callbacks[num_callbacks] = b;
        callback_rows[num_callbacks++] = rows;
        break;
      default:
        if (total - real <= kHostPadLimit) {
          std::memset(host + real, 0, total - real);
          copies[num_copies++] = {offset, total};
        } else {
          copies[num_copies++] = {offset, real};
          zero_fills[num_fills++] = {offset + real, total - real};
        }
        break;
    }
  }
  // Once copies are queued, the slot's event must be recorded after them even
  // if a later step throws: the next request waits on it before overwriting
  // the pinned memory those copies read.
  struct MarkConsumed {
    DeviceBackend& backend;
    int slot;
    ~MarkConsumed() {
      if (slot < 0) return;
      try {
        backend.mark_staging_consumed(slot);
      } catch (const std::exception& e) {
        spdlog::error("recording the staging slot's event: {}", e.what());
      }
    }
  } mark_consumed{*backend_, slot};
  // Merge copies separated only by alignment gaps (bytes no buffer owns).
  for (int i = 0; i < num_copies;) {
    Span merged = copies[i++];
    while (i < num_copies && copies[i].offset >= merged.offset + merged.bytes &&
           copies[i].offset - (merged.offset + merged.bytes) < kAlign) {
      merged.bytes = copies[i].offset + copies[i].bytes - merged.offset;
      ++i;
    }
    backend_->copy_to_device(device_base + merged.offset, host_base + merged.offset, merged.bytes);
  }
  for (int i = 0; i < num_fills; ++i)
    backend_->fill_zero(device_base + zero_fills[i].offset, zero_fills[i].bytes);
  for (int i = 0; i < num_callbacks; ++i) {
    const int b = callbacks[i];
    const int64_t rows = callback_rows[i];
    plugin_.call("pad_buffer", &shape, [&](eg_error* e) {
      return plugin_.api()->pad_buffer(plugin_.handle(), b, &device_buffers[b], rows,
                                       backend_->stream(), e);
    });
  }
}

eg_tensor GraphManager::run_eager(int32_t path, const std::vector<const eg_item*>& items,
                                  int64_t tokens, const std::vector<int64_t>& axis_keys,
                                  Scratch& scratch) {
  prepare_device_once();
  const eg_graph_shape shape = make_shape(path, tokens, axis_keys);
  size_t buffer_bytes = 0;
  std::vector<eg_tensor> buffers = buffer_layout(shape, &buffer_bytes);
  eg_tensor output = output_layout(shape);
  const size_t ws = workspace_bytes(shape);
  const size_t out_bytes = align_up(tensor_bytes(output));
  const size_t need = buffer_bytes + out_bytes + align_up(ws);
  // The previous eager run's staging and scratch may still be in use.
  backend_->synchronize();
  if (scratch.bytes < need) {
    backend_->free(scratch.memory);
    scratch.memory = nullptr;
    scratch.bytes = 0;
    scratch.memory = backend_->alloc(need, "an eager run of " + describe_shape(shape));
    scratch.bytes = need;
  }
  if (scratch.host_bytes < buffer_bytes || !scratch.host) {
    backend_->free_host(scratch.host);
    scratch.host = nullptr;
    scratch.host_bytes = 0;
    scratch.host = backend_->alloc_host(std::max<size_t>(buffer_bytes, 1), "eager staging");
    scratch.host_bytes = buffer_bytes;
  }
  char* base = static_cast<char*>(scratch.memory);
  for (auto& t : buffers) t.data = base + reinterpret_cast<uintptr_t>(t.data);
  output.data = base + buffer_bytes;
  void* workspace = base + buffer_bytes + out_bytes;
  // Values a batch leaves unset keep what capture preparation gives them, as in
  // a replayed graph.
  plugin_.call("prepare_capture_inputs (eager run)", &shape, [&](eg_error* e) {
    return plugin_.api()->prepare_capture_inputs(plugin_.handle(), &shape, buffers.data(),
                                                 static_cast<int32_t>(buffers.size()),
                                                 backend_->stream(), e);
  });
  if (config_.poison_memory) {
    backend_->fill_bytes(output.data, 0xFF, tensor_bytes(output));
    backend_->fill_bytes(workspace, 0xFF, ws);
  }
  fill_buffers(shape, buffers, items, scratch.host, -1);
  eg_forward_args args{};
  args.shape = shape;
  args.buffers = buffers.data();
  args.num_buffers = static_cast<int32_t>(buffers.size());
  args.output = output;
  args.workspace = workspace;
  args.workspace_size = ws;
  args.stream = backend_->stream();
  auto fn = plugin_.api()->forward_eager ? plugin_.api()->forward_eager : plugin_.api()->forward;
  plugin_.call("eager forward", &shape,
               [&](eg_error* e) { return fn(plugin_.handle(), &args, e); });
  return output;
}

Result GraphManager::execute(const std::vector<const Item*>& items) {
  const eg_model_info& info = plugin_.info();
  const size_t n = items.size();
  const int num_paths = info.num_paths;
  std::vector<int64_t> out_tokens(n);
  std::vector<std::vector<int64_t>> path_tokens(n, std::vector<int64_t>(num_paths));
  int64_t total_rows = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!items[i] || !items[i]->get())
      throw Error(ErrorKind::Input,
                  "item " + std::to_string(i) + " is empty (moved-from or never made)");
    const eg_item_spec& s = items[i]->spec();
    if (s.output_tokens < 0)
      throw Error(ErrorKind::Input, "item " + std::to_string(i) + " has negative output tokens");
    out_tokens[i] = s.output_tokens;
    for (int p = 0; p < num_paths; ++p) {
      if (s.path_tokens[p] < 0)
        throw Error(ErrorKind::Input,
                    "item " + std::to_string(i) + " has negative tokens on a path");
      path_tokens[i][p] = s.path_tokens[p];
    }
    total_rows += s.output_tokens;
  }

  Result result;
  result.backend_ = backend_;
  result.hidden_ = info.out_hidden_size;
  result.dtype_ = info.out_dtype;
  result.device_ = backend_->type();
  result.total_rows_ = total_rows;
  result.offsets_.assign(n, 0);
  result.rows_ = out_tokens;
  const size_t row_bytes = static_cast<size_t>(info.out_hidden_size) * dtype_size(info.out_dtype);
  {
    auto backend = backend_;
    // One allocation per call, stream-ordered: freeing it never waits for the device.
    void* mem =
        backend_->alloc_async(std::max<size_t>(total_rows * row_bytes, 1), "the call's results");
    result.memory_ = std::shared_ptr<void>(mem, [backend](void* p) { backend->free_async(p); });
  }
  if (n == 0) return result;

  const std::vector<PackedBatch> batches =
      pack_items(out_tokens, path_tokens, packing_budgets_, plan_.max_batch_size);
  char* result_base = static_cast<char*>(result.memory_.get());
  int64_t next_row = 0;
  std::vector<const eg_item*> batch_items;
  std::vector<eg_tensor> dst;
  std::vector<int64_t> axis_keys(info.num_capture_axes);

  for (const PackedBatch& batch : batches) {
    const int64_t bn = static_cast<int64_t>(batch.items.size());
    batch_items.clear();
    dst.clear();
    const int64_t batch_first_row = next_row;
    for (int64_t idx : batch.items) {
      batch_items.push_back(items[idx]->get());
      result.offsets_[idx] = next_row;
      eg_tensor t{};
      t.data = result_base + next_row * row_bytes;
      t.dtype = info.out_dtype;
      t.device = backend_->type();
      t.ndim = 2;
      t.shape[0] = out_tokens[idx];
      t.shape[1] = info.out_hidden_size;
      dst.push_back(t);
      next_row += out_tokens[idx];
    }
    if (info.num_capture_axes > 0)
      plugin_.call("select_axis_keys", [&](eg_error* e) {
        return plugin_.api()->select_axis_keys(plugin_.handle(), batch_items.data(), bn,
                                               axis_keys.data(), e);
      });

    eg_tensor outputs[EG_MAX_PATHS] = {};
    bool all_eager = true;
    bool chose_eager = false;  // a graph fitted but an eager run was expected faster
    for (int p = 0; p < num_paths; ++p) {
      const int64_t tokens = batch.path_tokens[p];
      if (tokens == 0) continue;
      bool replayed = false;
      if (config_.use_graphs && captured_ && batch.path_budget[p] && *batch.path_budget[p] > 0) {
        auto it = graphs_.find(GraphKey{p, *batch.path_budget[p], axis_keys});
        if (it != graphs_.end() && config_.prefer_faster_path && captured_ &&
            !eager_overhead_ms_.empty() && eager_expected_faster(it->second, tokens)) {
          chose_eager = true;
          it = graphs_.end();
        }
        if (it != graphs_.end()) {
          Captured& g = it->second;
          const int slot = static_cast<int>(staging_turn_++ & 1);
          fill_buffers(g.shape, g.buffers, batch_items, staging_[slot], slot);
          if (config_.poison_memory) {  // NaN in every float format: stale rows must not leak
            backend_->fill_bytes(output_arena_[p], 0xFF, output_arena_bytes_[p]);
            backend_->fill_bytes(workspace_, 0xFF, workspace_bytes_);
          }
          g.graph->replay();
          outputs[p] = g.output;
          stats_.graph_hits += bn;
          stats_.real_tokens += tokens;
          stats_.budget_tokens += g.shape.token_budget;
          replayed = true;
          all_eager = false;
        }
      }
      if (!replayed) outputs[p] = run_eager(p, batch_items, tokens, axis_keys, eager_scratch_[p]);
    }
    if (all_eager && chose_eager) {
      ++stats_.batches_eager_chosen;  // neither a hit nor a miss: a graph was there
    } else if (all_eager) {
      stats_.graph_misses += bn;
      ++stats_.batches_eager;
    } else {
      ++stats_.batches_graph;
    }

    if (plugin_.api()->postprocess) {
      plugin_.call("postprocess", [&](eg_error* e) {
        return plugin_.api()->postprocess(plugin_.handle(), outputs, num_paths, batch_items.data(),
                                          bn, dst.data(), backend_->stream(), e);
      });
    } else {
      const int64_t rows = next_row - batch_first_row;
      const eg_tensor& out = outputs[0];
      if (rows > 0 && (!out.data || out.shape[0] < rows))
        throw_plugin("plugin '" + plugin_.name() + "': path 0 produced " +
                     std::to_string(out.data ? out.shape[0] : 0) + " rows for a batch of " +
                     std::to_string(rows) + " output tokens and has no postprocess");
      backend_->copy_on_device(result_base + batch_first_row * row_bytes, out.data,
                               static_cast<size_t>(rows) * row_bytes);
    }
  }

  if (config_.stats_log_interval > 0) {
    const int64_t total = stats_.graph_hits + stats_.graph_misses;
    if (total >= next_stats_log_ + config_.stats_log_interval) {
      next_stats_log_ = total - total % config_.stats_log_interval;
      const Stats s = stats();
      spdlog::debug(
          "graph stats for '{}': hits={}, misses={}, hit_rate={:.1f}%, padded-token "
          "efficiency={:.1f}%",
          plugin_.name(), s.graph_hits, s.graph_misses, 100.0 * s.hit_rate,
          100.0 * s.padded_token_efficiency);
    }
  }
  return result;
}

Stats GraphManager::stats() const {
  Stats s = stats_;
  const int64_t total = s.graph_hits + s.graph_misses;
  s.hit_rate = total > 0 ? static_cast<double>(s.graph_hits) / total : 0.0;
  s.padded_token_efficiency =
      s.budget_tokens > 0 ? static_cast<double>(s.real_tokens) / s.budget_tokens : 0.0;
  return s;
}

}  // namespace encgraph
