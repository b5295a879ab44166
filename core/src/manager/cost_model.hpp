// The cost model behind prefer_faster_path: after capture, each graph's replay
// is timed and each path's eager launch overhead measured; a batch then runs
// eagerly at its exact size when that is expected clearly faster than
// replaying a much larger budget.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"
#include "capture_cache.hpp"

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

class CostModel {
 public:
  CostModel(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin);

  // Times every graph's replay (stored in the graph) and each path's eager
  // overhead. Runs the plugin's forward on the graphs' own buffers.
  void calibrate(CaptureCache& cache);
  void reset() { eager_overhead_ms_.clear(); }
  bool calibrated() const { return !eager_overhead_ms_.empty(); }
  // Whether an eager run of `tokens` is expected to beat replaying `graph`.
  bool eager_expected_faster(const CaptureCache& cache, const CapturedGraph& graph,
                             int64_t tokens) const;

 private:
  std::shared_ptr<DeviceBackend> backend_;
  const PluginInstance& plugin_;
  std::vector<double> eager_overhead_ms_;  // per path: eager forward minus replay
};

}  // namespace encgraph
