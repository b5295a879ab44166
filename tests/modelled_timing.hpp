// Times the tests choose for the manager's cost model (RunTiming): the work
// runs for real (its rows are checked), but its time is a function of what
// ran, so calibration, eager choices and the first-batch split decide the
// same way however loaded the machine is.
#pragma once

#include "manager/run_timing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

namespace encgraph::test {

class ModelledTiming final : public RunTiming {
 public:
  // A forward of a budget costs ms_per_1k per 1024 of its tokens; eager
  // forwards eager_ms_per_1k more; staging takes staging_ms.
  double ms_per_1k = 2.0;
  double eager_ms_per_1k = 0.0;
  double staging_ms = 0.0;
  double longest_ms = 0.0;  // the longest time_ms handed out (calibration's largest replay)

  double cost_ms(const TimedRun& run) const {
    const double k = static_cast<double>(run.shape.token_budget) / 1024.0;
    switch (run.work) {
      case TimedWork::Warmup:
      case TimedWork::Replay: return ms_per_1k * k;
      case TimedWork::EagerCalibration:
      case TimedWork::EagerRun: return (ms_per_1k + eager_ms_per_1k) * k;
      case TimedWork::Staging: return staging_ms;
    }
    return std::nan("");
  }
  double time_ms(const TimedRun& run, const std::function<void()>& enqueue) override {
    enqueue();
    const double ms = cost_ms(run);
    longest_ms = std::max(longest_ms, ms);
    return ms;
  }
  std::unique_ptr<StreamTimer> make_timer(const TimedRun& run) override {
    // The cost is read when the timer is, so a test may change it in between.
    class Timer final : public StreamTimer {
     public:
      Timer(const ModelledTiming& owner, TimedRun run) : owner_(owner), run_(run) {}
      void start() override { started_ = true; }
      void stop() override { stopped_ = true; }
      double elapsed_ms() override {
        return started_ && stopped_ ? owner_.cost_ms(run_) : std::nan("");
      }

     private:
      const ModelledTiming& owner_;
      TimedRun run_;
      bool started_ = false, stopped_ = false;
    };
    return std::make_unique<Timer>(*this, run);
  }
};

}  // namespace encgraph::test
