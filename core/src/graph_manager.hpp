// The budget-graph manager: captures one graph per (path, budget, axis keys),
// packs items into batches, refreshes the captured buffers through their padding
// logic, replays, post-processes, and falls back to eager runs where no graph fits.
#pragma once

#include "device_backend.hpp"
#include "plugin_instance.hpp"

#include <encgraph/packer.hpp>
#include <encgraph/runtime.hpp>

#include <map>
#include <memory>
#include <vector>

namespace encgraph {

class GraphManager {
 public:
  GraphManager(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
               const RuntimeConfig& config);
  ~GraphManager();

  void capture();
  bool is_captured() const { return captured_; }
  void clear();
  Result execute(const std::vector<const Item*>& items);
  Stats stats() const;
  const BudgetPlan& plan() const { return plan_; }
  // Graph keys the plan asks for, in capture order.
  std::vector<eg_graph_shape> planned_graphs() const;

 private:
  struct GraphKey {
    int32_t path;
    int64_t budget;
    std::vector<int64_t> axis_keys;
    bool operator<(const GraphKey& o) const {
      if (path != o.path) return path < o.path;
      if (budget != o.budget) return budget < o.budget;
      return axis_keys < o.axis_keys;
    }
  };
  struct Captured {
    eg_graph_shape shape{};
    void* buffer_memory = nullptr;  // one allocation for all of this graph's buffers
    std::vector<eg_tensor> buffers;
    eg_tensor output{};
    eg_forward_args args{};
    std::unique_ptr<RecordedGraph> graph;
    double replay_ms = 0.0;  // measured after capture (prefer_faster_path)
  };
  // Device memory for one eager run, grown as needed and kept for reuse.
  struct Scratch {
    void* memory = nullptr;
    size_t bytes = 0;
    void* host = nullptr;
    size_t host_bytes = 0;
  };

  eg_graph_shape make_shape(int32_t path, int64_t budget, const std::vector<int64_t>& keys) const;
  std::vector<eg_tensor> buffer_layout(const eg_graph_shape& shape, size_t* total_bytes) const;
  eg_tensor output_layout(const eg_graph_shape& shape) const;
  size_t workspace_bytes(const eg_graph_shape& shape) const;
  void capture_one(const eg_graph_shape& shape);
  void fill_buffers(const eg_graph_shape& shape, const std::vector<eg_tensor>& device_buffers,
                    const std::vector<const eg_item*>& items, void* staging_base, int slot);
  eg_tensor run_eager(int32_t path, const std::vector<const eg_item*>& items, int64_t tokens,
                      const std::vector<int64_t>& axis_keys, Scratch& scratch);
  void release_memory();
  void prepare_device_once();
  // Times every graph's replay and each path's eager launch overhead.
  void calibrate();
  // Whether an eager run of `tokens` is expected to beat replaying `graph`.
  bool eager_expected_faster(const Captured& graph, int64_t tokens) const;

  std::shared_ptr<DeviceBackend> backend_;
  PluginInstance& plugin_;
  RuntimeConfig config_;
  BudgetPlan plan_;
  std::vector<std::vector<int64_t>> axis_key_product_;

  bool captured_ = false;
  bool device_prepared_ = false;  // the plugin's prepare_device ran
  std::map<GraphKey, Captured> graphs_;
  // One output arena per path: a batch's paths all replay before post-processing.
  std::vector<void*> output_arena_;
  std::vector<size_t> output_arena_bytes_;
  // Budgets batches are packed against: the captured ones (the plan's until
  // capture, smaller when out-of-memory dropped some).
  std::vector<std::vector<int64_t>> packing_budgets_;
  size_t graph_memory_ = 0;  // arenas, staging excluded, plus every graph's buffers
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* staging_[2] = {nullptr, nullptr};  // alternating host staging slots
  int64_t staging_turn_ = 0;               // which staging slot the next replay fills
  std::vector<Scratch> eager_scratch_;     // one per path
  std::vector<double> eager_overhead_ms_;  // per path: eager forward minus replay, measured

  Stats stats_;
  int64_t next_stats_log_ = 0;
};

}  // namespace encgraph
