#include "run_timing.hpp"

#include <utility>

namespace encgraph {
namespace {

class DeviceTiming final : public RunTiming {
 public:
  explicit DeviceTiming(std::shared_ptr<DeviceBackend> backend) : backend_(std::move(backend)) {}
  double time_ms(const TimedRun&, const std::function<void()>& enqueue) override {
    return backend_->time_ms(enqueue);
  }
  std::unique_ptr<StreamTimer> make_timer(const TimedRun&) override {
    return backend_->make_timer();
  }

 private:
  std::shared_ptr<DeviceBackend> backend_;
};

}  // namespace

std::shared_ptr<RunTiming> device_timing(std::shared_ptr<DeviceBackend> backend) {
  return std::make_shared<DeviceTiming>(std::move(backend));
}

}  // namespace encgraph
