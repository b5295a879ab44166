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
#include "run_timing.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/item.hpp>
#include <encgraph/packer.hpp>
#include <encgraph/result.hpp>

#include <memory>
#include <optional>
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
  BatchExecutor(std::shared_ptr<DeviceBackend> backend, RunTiming& timing,
                const PluginInstance& plugin, const RuntimeConfig& config, Parts parts);

  Result execute(const std::vector<const Item*>& items, ExecuteMode mode);
  // Drops the timings of chosen eager runs not yet fed back: a new capture or
  // a clear() makes them about graphs that are gone.
  // Also forgets the staging measurements (re-measured by the next request).
  void forget_checks() {
    eager_checks_.clear();
    staging_checks_.clear();
    staging_ms_per_token_ = 0.0;
  }
  // Diagnosis (verify): every batch runs under these axis keys, whatever the
  // plugin selects; nullopt restores the plugin's choice.
  void force_axis_keys(std::optional<std::vector<int64_t>> keys) {
    forced_axis_keys_ = std::move(keys);
  }

 private:
  // Whether path `path` of `batch` replays a graph (then `graph` is it);
  // otherwise `reason` says why it runs eagerly.
  // When the cost model chose eager, `skipped` is the graph it chose against.
  bool choose_graph(int32_t path, const PackedBatch& batch, const std::vector<int64_t>& axis_keys,
                    ExecuteMode mode, bool too_many_frames, CapturedGraph*& graph,
                    CapturedGraph*& skipped, EagerReason& reason) const;
  // Feeds finished timings of chosen eager runs back into their graphs
  // (eager_choice_withdrawn), and finished staging timings into
  // staging_ms_per_token_; never waits for the device.
  void collect_eager_feedback();
  // Whether this call may split its first batch and time its staging: one
  // path, no capture axes, graphs replayed with the cost model calibrated,
  // and a backend whose staging overlaps replays.
  bool pipelining(ExecuteMode mode) const;
  // Splits batches[0] into a head and the rest where pipeline_split_point
  // says that pays. tokens and frames: per item of the call (path 0).
  // Returns whether it split.
  bool maybe_split_first_batch(std::vector<PackedBatch>& batches,
                               const std::vector<int64_t>& tokens,
                               const std::vector<int64_t>& frames) const;
  // Modelled replay time for `tokens` on path 0 at its smallest fitting
  // budget; nullopt without a graph there, or where the cost model would run
  // such a batch eagerly (its staging then goes in line: no overlap to weigh).
  std::optional<double> replay_ms_for(int64_t tokens) const;

  // An eager run the cost model chose, timed on the device.
  struct EagerCheck {
    GraphKey skipped;
    int64_t tokens = 0;
    std::unique_ptr<StreamTimer> timer;
  };

  // A request's first replay, timed on the device from before its staging
  // to its inputs being in place: on an idle stream, the host staging and
  // upload that the request waits for.
  struct StagingCheck {
    int64_t tokens = 0;
    std::unique_ptr<StreamTimer> timer;
  };

  std::shared_ptr<DeviceBackend> backend_;
  RunTiming& timing_;
  const PluginInstance& plugin_;
  const RuntimeConfig& config_;
  Parts parts_;
  static constexpr size_t kMaxEagerChecks = 64;
  std::vector<EagerCheck> eager_checks_;
  std::vector<StagingCheck> staging_checks_;
  double staging_ms_per_token_ = 0.0;  // path 0; 0: not measured yet
  std::optional<std::vector<int64_t>> forced_axis_keys_;
};

}  // namespace encgraph
