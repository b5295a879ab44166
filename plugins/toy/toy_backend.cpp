#include "toy_backend.hpp"

#include <algorithm>
#include <cstring>

namespace toy {

namespace {

class CpuBackend final : public Backend {
 public:
  bool on_cpu() const override { return true; }
  void forward(const Options& o, const ForwardCall& call, void*) const override {
    cpu_forward(o, call);
  }
  void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void*) const override {
    std::fill(dst + rows, dst + std::max(rows, capacity), -1);
  }
  void copy(void* dst, const void* src, size_t bytes, void*) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden, void*) const override {
    cpu_mean_rows(dst, src, rows, hidden);
  }
};

}  // namespace

std::unique_ptr<Backend> make_backend(int32_t device, int32_t device_index) {
  if (device == EG_DEVICE_CUDA) return make_cuda_backend(device_index);
  return std::make_unique<CpuBackend>();
}

}  // namespace toy
