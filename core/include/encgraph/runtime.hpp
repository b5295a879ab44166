// The C++ embedding API: load a plugin by name, create an instance on a device,
// capture the budget graphs, execute batches of items, read statistics.
//
//   encgraph::RuntimeConfig cfg;
//   cfg.plugin = "toy";
//   encgraph::Runtime rt(cfg);
//   rt.capture();
//   std::vector<encgraph::Item> items = ...;   // rt.make_item(desc)
//   encgraph::Result r = rt.execute(items);    // r.item(i): rows of item i
//
// A Runtime is used from one thread at a time.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/budget_plan.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace encgraph {

class DeviceBackend;
class PluginInstance;

struct RuntimeConfig {
  std::string plugin;                              // plugin name
  std::vector<std::filesystem::path> plugin_dirs;  // searched first
  std::string device = "auto";                     // "auto", "cpu", "cuda", "cuda:N"
  std::string weights;                             // path, "random", or empty (plugin default)
  std::vector<std::pair<std::string, std::string>> plugin_config;  // flattened key/values
  BudgetRequest budgets;
  bool use_graphs = true;            // false: every batch runs eagerly at its exact size
  bool drop_budget_on_oom = false;   // out of memory while capturing a budget: drop it, warn
  int64_t stats_log_interval = 100;  // log hit statistics every N items (0: never)
  // After capture, time each graph; run a batch eagerly at its exact size when
  // that is expected to be clearly faster than replaying a much larger budget.
  bool prefer_faster_path = true;
  bool poison_memory = false;  // debugging: fill output and workspace with NaN before each run
};

// A plugin-owned item (image or video), made by Runtime::make_item.
class Item {
 public:
  Item() = default;
  Item(Item&&) noexcept;
  Item& operator=(Item&&) noexcept;
  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;
  ~Item();
  const eg_item* get() const { return item_; }
  const eg_item_spec& spec() const { return spec_; }

 private:
  friend class Runtime;
  std::shared_ptr<PluginInstance> owner_;  // keeps the instance alive while the item is
  eg_item* item_ = nullptr;
  eg_item_spec spec_{};
};

// One call's outputs: a single allocation on the runtime's device holding every
// item's rows; item(i) is a view of item i (original order), valid while the
// Result lives.
class Result {
 public:
  Result() = default;
  Result(Result&&) noexcept;
  Result& operator=(Result&&) noexcept;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result();

  size_t size() const { return offsets_.size(); }
  eg_tensor item(size_t i) const;
  int64_t rows(size_t i) const { return rows_[i]; }
  int64_t hidden_size() const { return hidden_; }
  int32_t dtype() const { return dtype_; }
  int32_t device() const { return device_; }
  int64_t total_rows() const { return total_rows_; }
  // Every item's rows, copied to host memory, item i's starting at host_offset(i).
  std::vector<uint8_t> to_host() const;
  size_t host_offset(size_t i) const {
    return static_cast<size_t>(offsets_.at(i) * hidden_) * element_size();
  }
  // Waits until the device has written every row (for timing; reads synchronise).
  void wait() const;
  // Item i's rows as float on the host (converts bf16/f16/f64).
  std::vector<float> item_as_float(size_t i) const;

 private:
  size_t element_size() const;

  friend class GraphManager;
  friend class DataParallelRuntime;
  std::shared_ptr<void> memory_;  // frees through the owning backend
  std::vector<int64_t> offsets_;  // row offset of item i
  std::vector<int64_t> rows_;
  int64_t total_rows_ = 0;
  int64_t hidden_ = 0;
  int32_t dtype_ = EG_DTYPE_F32;
  int32_t device_ = EG_DEVICE_CPU;
  std::shared_ptr<DeviceBackend> backend_;
};

struct Stats {
  int64_t graph_hits = 0;
  int64_t graph_misses = 0;
  double hit_rate = 0.0;
  int64_t num_graphs = 0;
  std::vector<int64_t> token_budgets;
  int64_t real_tokens = 0;               // tokens of real items sent through graphs
  int64_t budget_tokens = 0;             // tokens of the budgets those graphs were captured for
  double padded_token_efficiency = 0.0;  // real_tokens / budget_tokens
  int64_t batches_graph = 0;
  int64_t batches_eager = 0;         // batches no graph ran (misses)
  int64_t batches_eager_chosen = 0;  // of the graph-fitting batches, run eagerly as faster
  double capture_seconds = 0.0;
  int64_t graph_memory_bytes = 0;  // buffers, output and workspace of the graphs
};

class GraphManager;
class PluginInstance;

class Runtime {
 public:
  explicit Runtime(const RuntimeConfig& config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Decoded pixels or a synthetic geometry in; a plugin item out.
  Item make_item(const eg_item_desc& desc);

  void capture();
  bool is_captured() const;
  void clear();
  bool supports_modality(eg_modality modality) const;

  // Runs every item; results in the order given.
  Result execute(const std::vector<const Item*>& items);
  Result execute(const std::vector<Item>& items);

  Stats stats() const;
  const BudgetPlan& plan() const;
  const eg_model_info& model_info() const;
  std::string plugin_name() const;
  std::string plugin_version() const;
  // Waits for all work the runtime has enqueued.
  void synchronize();
  eg_device_type device_type() const;
  std::string device_name() const;

 private:
  friend class DataParallelRuntime;
  std::shared_ptr<DeviceBackend> backend_;
  std::shared_ptr<PluginInstance> instance_;
  std::unique_ptr<GraphManager> manager_;
};

}  // namespace encgraph
