#include "device_backend.hpp"

#include <encgraph/error.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace encgraph {
namespace {

// A CPU "graph": the recorded call, replayed by calling it again on the same
// static buffers, so the manager's capture/replay path is exercised unchanged.
class CpuGraph final : public RecordedGraph {
 public:
  explicit CpuGraph(std::function<void()> body) : body_(std::move(body)) {}
  void replay() override { body_(); }

 private:
  std::function<void()> body_;
};

class CpuBackend final : public DeviceBackend {
 public:
  eg_device_type type() const override { return EG_DEVICE_CPU; }
  std::string name() const override { return "cpu"; }
  void* stream() override { return nullptr; }

  void* alloc(size_t bytes, const std::string& what) override {
    void* p = std::aligned_alloc(256, round_up(bytes));
    if (!p)
      throw Error(ErrorKind::Device,
                  "out of host memory allocating " + std::to_string(bytes) + " bytes for " + what);
    return p;
  }
  void free(void* p) noexcept override {
    if (!p) return;
    std::free(p);
  }
  // Host and device memory are the same thing here.
  void* alloc_host(size_t bytes, const std::string& what) override { return alloc(bytes, what); }
  void free_host(void* p) noexcept override { free(p); }

  void copy_to_device(void* d, const void* s, size_t n) override { copy(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override { copy(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { copy(d, s, n); }
  void fill_bytes(void* d, int value, size_t n) override {
    if (n) std::memset(d, value, n);
  }
  void* alloc_async(size_t bytes, const std::string& what) override { return alloc(bytes, what); }
  void free_async(void* p) noexcept override { free(p); }
  void synchronize() override {}
  void mark_staging_consumed(int) override {}
  void wait_staging_free(int) override {}

  std::unique_ptr<RecordedGraph> capture(const std::function<void()>& body, const std::string&,
                                         CaptureTimes* times) override {
    // The capture run does real work, as a CUDA capture would record it;
    // there is nothing to instantiate.
    const auto t0 = std::chrono::steady_clock::now();
    body();
    if (times)
      times->record_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::make_unique<CpuGraph>(body);
  }
  double time_ms(const std::function<void()>& enqueue) override {
    const auto t0 = std::chrono::steady_clock::now();
    enqueue();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  std::unique_ptr<StreamTimer> make_timer() override {
    class WallTimer final : public StreamTimer {
     public:
      void start() override {
        t0_ = std::chrono::steady_clock::now();
        started_ = true;
      }
      void stop() override {
        t1_ = std::chrono::steady_clock::now();
        stopped_ = true;
      }
      double elapsed_ms() override {
        if (!started_ || !stopped_) return std::nan("");
        return std::chrono::duration<double, std::milli>(t1_ - t0_).count();
      }

     private:
      std::chrono::steady_clock::time_point t0_, t1_;
      bool started_ = false, stopped_ = false;
    };
    return std::make_unique<WallTimer>();
  }

 private:
  static size_t round_up(size_t n) { return ((n + 255) / 256) * 256 + (n == 0 ? 256 : 0); }
  static void copy(void* d, const void* s, size_t n) {
    if (n && d != s) std::memmove(d, s, n);
  }
};

}  // namespace

std::shared_ptr<DeviceBackend> make_cpu_backend() {
  return std::make_shared<CpuBackend>();
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return 4;
    case EG_DTYPE_F16: return 2;
    case EG_DTYPE_BF16: return 2;
    case EG_DTYPE_F64: return 8;
    case EG_DTYPE_I32: return 4;
    case EG_DTYPE_I64: return 8;
    case EG_DTYPE_U8: return 1;
    default: return 0;
  }
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case EG_DTYPE_F32: return "f32";
    case EG_DTYPE_F16: return "f16";
    case EG_DTYPE_BF16: return "bf16";
    case EG_DTYPE_F64: return "f64";
    case EG_DTYPE_I32: return "i32";
    case EG_DTYPE_I64: return "i64";
    case EG_DTYPE_U8: return "u8";
    default: return "unknown";
  }
}

}  // namespace encgraph
