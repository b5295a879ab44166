// The capture cache: one recorded graph per (path, budget, axis keys) of the
// plan, their input buffers, and the memory all of them share (one workspace,
// one arena per path and named output, two host staging slots), sized for the
// largest graph since graphs never run at the same time. Out of memory while
// capturing drops the largest budget when the configuration allows it.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"
#include "graph_geometry.hpp"
#include "graph_plan.hpp"
#include "run_timing.hpp"
#include "staging.hpp"

#include <encgraph/runtime_config.hpp>
#include <encgraph/stats.hpp>

#include <limits>
#include <map>
#include <memory>
#include <vector>

namespace encgraph {

struct CapturedGraph {
  eg_graph_shape shape{};
  void* buffer_memory = nullptr;  // one block for all of this graph's input buffers
  std::vector<eg_tensor> buffers;
  std::vector<eg_tensor> outputs;  // one per named output, in the shared arenas
  eg_forward_args args{};          // points into buffers and outputs
  std::unique_ptr<RecordedGraph> graph;
  double replay_ms = 0.0;  // measured after capture, or estimated from warmup_ms (the cost model)
  double warmup_ms = 0.0;  // the warm-up forward before capture, timed on the device
  // Eager runs of this many tokens or more are not chosen over this graph: one
  // that was, by the cost model's estimate, took longer than the replay
  // (BatchExecutor's feedback; reset by the next calibration).
  int64_t eager_not_faster_from = std::numeric_limits<int64_t>::max();
};

class CaptureCache {
 public:
  CaptureCache(std::shared_ptr<DeviceBackend> backend, PluginInstance& plugin,
               const RuntimeConfig& config, const GraphPlan& plan, const GraphGeometry& geometry,
               Staging& staging, RunTiming& timing);
  ~CaptureCache();
  CaptureCache(const CaptureCache&) = delete;
  CaptureCache& operator=(const CaptureCache&) = delete;

  // Captures every planned graph (clearing earlier ones). On an error nothing
  // stays captured.
  void capture();
  void clear();
  bool captured() const { return captured_; }

  CapturedGraph* find(const GraphKey& key);
  const CapturedGraph* find(const GraphKey& key) const;
  std::map<GraphKey, CapturedGraph>& graphs() { return graphs_; }
  const std::map<GraphKey, CapturedGraph>& graphs() const { return graphs_; }
  int64_t graphs_of_path(int path) const;
  // Budgets batches are packed against: the captured ones (the plan's until
  // capture, fewer when out-of-memory dropped some).
  const std::vector<std::vector<int64_t>>& packing_budgets() const { return packing_budgets_; }
  // Arenas and workspace, staging excluded, plus every graph's buffers.
  size_t memory_bytes() const { return graph_memory_; }
  // The last capture()'s warm-up, capture and instantiate seconds (the other
  // phases are the manager's).
  const CapturePhases& phases() const { return phases_; }

  // Fills `graph`'s buffers with the batch (alternating staging slots, so the
  // next batch's staging overlaps this replay) and replays it; its outputs
  // hold the rows until the next replay of a graph of the same path.
  // `staging_timer`, when given, is started before the batch's staging and
  // stopped once its inputs are in place (before the replay).
  void replay(CapturedGraph& graph, const std::vector<const eg_item*>& items,
              StreamTimer* staging_timer = nullptr);

 private:
  bool allocate_shared(std::vector<eg_graph_shape>& shapes);
  void capture_one(const eg_graph_shape& shape);
  void release_memory();

  std::shared_ptr<DeviceBackend> backend_;
  PluginInstance& plugin_;
  const RuntimeConfig& config_;
  const GraphPlan& plan_;
  const GraphGeometry& geometry_;
  Staging& staging_;
  RunTiming& timing_;

  bool captured_ = false;
  CapturePhases phases_;
  std::map<GraphKey, CapturedGraph> graphs_;
  std::vector<std::vector<void*>> arena_;         // [path][output]
  std::vector<std::vector<size_t>> arena_bytes_;  // [path][output]
  std::vector<std::vector<int64_t>> packing_budgets_;
  size_t graph_memory_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* host_staging_[2] = {nullptr, nullptr};  // alternating slots
  size_t staging_bytes_ = 0;                    // the size of each
  int64_t staging_turn_ = 0;                    // which slot the next replay fills
};

}  // namespace encgraph
