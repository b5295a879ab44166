// The cost model behind prefer_faster_path: after capture, each graph's replay
// is timed and each path's eager launch overhead measured; a batch then runs
// eagerly at its exact size when that is expected clearly faster than
// replaying a much larger budget.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"
#include "capture_cache.hpp"
#include "run_timing.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace encgraph {

// Below this, one run is short enough for launch jitter to matter.
inline constexpr double kShortRunMs = 2.0;

// The calibration's timing of one run: `time_once` runs it and returns its
// milliseconds. A warm-up run first when asked, then one timed run; when that
// is shorter than kShortRunMs, the median of three more.
double calibration_time_ms(const std::function<double()>& time_once, bool warm_up);

// Replay estimates from the warm-up forwards, for one (path, axis keys) group
// of graphs sorted by budget, whose first and last replays were timed. A long
// warm-up forward runs the same kernels as the replay and costs as much, so
// timing every replay again doubled the capture's device work. Trusted only
// when the last (largest) graph's warm-up matches its timed replay:
// replay/warm-up within [kWarmupScaleMin, kWarmupScaleMax] (a warm-up that
// tuned GEMMs is far slower). A graph in between then takes its warm-up times
// that ratio, if its warm-up is long (kShortRunMs) and the estimate is within
// a factor kWarmupOutlier either way of the line through the two timed
// replays (a first-use cost in one warm-up; an eager run that pays launch gaps
// the replay does not). Returns per graph the estimate, or a negative value:
// time it.
inline constexpr double kWarmupScaleMin = 0.75;
inline constexpr double kWarmupScaleMax = 1.15;
inline constexpr double kWarmupOutlier = 1.15;
std::vector<double> replay_estimates_from_warmups(const std::vector<int64_t>& budgets,
                                                  const std::vector<double>& warmup_ms,
                                                  double first_replay_ms, double last_replay_ms);

// Feedback on a choice eager_expected_faster made: an eager run of `tokens`
// instead of replaying `graph` took `eager_ms` on the device. When that is no
// faster than the replay, eager runs of `tokens` or more are not chosen over
// this graph again (larger batches cost more eagerly, the replay the same);
// returns whether it withdrew the choice. The estimate behind the choice
// interpolates replays of other budgets, while an eager run at an odd size can
// cost more than that (a product at a row count no graph tuned).
bool eager_choice_withdrawn(CapturedGraph& graph, int64_t tokens, double eager_ms);

class CostModel {
 public:
  CostModel(RunTiming& timing, const PluginInstance& plugin);

  // Sets every graph's replay time (timed, or estimated from its warm-up
  // forward where replay_estimates_from_warmups allows) and times each path's
  // eager overhead. Runs the plugin's forward on the graphs' own buffers.
  void calibrate(CaptureCache& cache);
  // Of the last calibrate(): graphs whose replay was timed, and estimated.
  int timed_replays() const { return timed_; }
  int estimated_replays() const { return estimated_; }
  void reset() { eager_overhead_ms_.clear(); }
  bool calibrated() const { return !eager_overhead_ms_.empty(); }
  // Whether an eager run of `tokens` is expected to beat replaying `graph`.
  bool eager_expected_faster(const CaptureCache& cache, const CapturedGraph& graph,
                             int64_t tokens) const;

 private:
  RunTiming& timing_;
  const PluginInstance& plugin_;
  std::vector<double> eager_overhead_ms_;  // per path: eager forward minus replay
  int timed_ = 0;
  int estimated_ = 0;
};

}  // namespace encgraph
