// The batch executor: validates a call's items, packs them into batches,
// lays out the result (per output, each batch's items consecutive), and runs
// each batch path by path: a captured graph where one fits (and is not
// expected slower), an eager run otherwise, for a recorded reason; then
// post-processes the batch into its items' rows.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"
#include "capture_cache.hpp"
#include "cost_model.hpp"
#include "eager_runner.hpp"
#include "graph_plan.hpp"
#include "graph_stats.hpp"
#include "postprocess.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/item.hpp>
#include <encgraph/packer.hpp>
#include <encgraph/result.hpp>

#include <memory>
#include <vector>

namespace encgraph {

class BatchExecutor {
 public:
  struct Parts {
    const GraphPlan& plan;
    CaptureCache& cache;
    const CostModel& cost;
    EagerRunner& eager;
    Postprocessor& postprocess;
    StatsRecorder& stats;
  };
  BatchExecutor(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin,
                const RuntimeConfig& config, Parts parts);

  Result execute(const std::vector<const Item*>& items, ExecuteMode mode);

 private:
  // Whether path `path` of `batch` replays a graph (then `graph` is it);
  // otherwise `reason` says why it runs eagerly.
  bool choose_graph(int32_t path, const PackedBatch& batch, const std::vector<int64_t>& axis_keys,
                    ExecuteMode mode, bool too_many_frames, CapturedGraph*& graph,
                    EagerReason& reason) const;

  std::shared_ptr<DeviceBackend> backend_;
  const PluginInstance& plugin_;
  const RuntimeConfig& config_;
  Parts parts_;
};

}  // namespace encgraph
