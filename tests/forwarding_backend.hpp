// A DeviceBackend that forwards every call to the CPU backend: tests derive
// from it and override only the behaviour they change (claiming overlapped
// staging, deferring copies, ...).
#pragma once

#include "device_backend.hpp"

#include <functional>
#include <memory>
#include <string>

namespace encgraph::test {

class ForwardingCpuBackend : public DeviceBackend {
 public:
  eg_device_type type() const override { return cpu_->type(); }
  std::string name() const override { return cpu_->name(); }
  void* stream() override { return cpu_->stream(); }
  void* alloc(size_t b, const std::string& w) override { return cpu_->alloc(b, w); }
  void free(void* p) noexcept override { cpu_->free(p); }
  void* alloc_async(size_t b, const std::string& w) override { return cpu_->alloc_async(b, w); }
  void free_async(void* p) noexcept override { cpu_->free_async(p); }
  void* alloc_host(size_t b, const std::string& w) override { return cpu_->alloc_host(b, w); }
  void free_host(void* p) noexcept override { cpu_->free_host(p); }
  void copy_to_device(void* d, const void* s, size_t b) override { cpu_->copy_to_device(d, s, b); }
  void copy_on_device(void* d, const void* s, size_t b) override { cpu_->copy_on_device(d, s, b); }
  void copy_to_host(void* d, const void* s, size_t b) override { cpu_->copy_to_host(d, s, b); }
  void fill_bytes(void* d, int v, size_t b) override { cpu_->fill_bytes(d, v, b); }
  void synchronize() override { cpu_->synchronize(); }
  void mark_staging_consumed(int slot) override { cpu_->mark_staging_consumed(slot); }
  void wait_staging_free(int slot) override { cpu_->wait_staging_free(slot); }
  std::unique_ptr<RecordedGraph> capture(const std::function<void()>& body, const std::string& w,
                                         CaptureTimes* t) override {
    return cpu_->capture(body, w, t);
  }
  double time_ms(const std::function<void()>& enqueue) override { return cpu_->time_ms(enqueue); }
  std::unique_ptr<StreamTimer> make_timer() override { return cpu_->make_timer(); }

 private:
  std::shared_ptr<DeviceBackend> cpu_ = make_cpu_backend();
};

}  // namespace encgraph::test
