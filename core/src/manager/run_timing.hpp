// Where the manager's timings come from. The cost model, the calibration and
// the first-batch split decide from measured times; behind this interface a
// test supplies times it chooses, so those decisions are checked without
// depending on how busy the machine is. The runtime times on the device.
#pragma once

#include "../device_backend.hpp"

#include <encgraph/plugin_api.h>

#include <functional>
#include <memory>

namespace encgraph {

// What is being timed.
enum class TimedWork {
  Warmup,            // the forward run before a graph's capture
  Replay,            // a graph's replay during calibration
  EagerCalibration,  // an eager forward during calibration (the smallest graph's buffers)
  EagerRun,          // an eager run the cost model chose over a graph
  Staging,           // a request's first staging and upload, before its replay
};

struct TimedRun {
  TimedWork work;
  // The graph's shape; for EagerRun the exact batch (token_budget = its tokens).
  eg_graph_shape shape;
};

class RunTiming {
 public:
  virtual ~RunTiming() = default;
  // Runs `enqueue` (work on the backend's stream) and returns its milliseconds.
  virtual double time_ms(const TimedRun& run, const std::function<void()>& enqueue) = 0;
  // A timer to start and stop around `run` (StreamTimer's rules: never blocks).
  virtual std::unique_ptr<StreamTimer> make_timer(const TimedRun& run) = 0;
};

// Times on `backend` (device events on CUDA, the wall clock on the CPU).
std::shared_ptr<RunTiming> device_timing(std::shared_ptr<DeviceBackend> backend);

}  // namespace encgraph
