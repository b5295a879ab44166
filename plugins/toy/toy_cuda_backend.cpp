// The toy on CUDA: toy_kernels.cu's launchers and the runtime's stream
// (compiled only when the plugin is built with CUDA).
#include "toy_kernels.hpp"
#include "toy_model.hpp"

#include <cuda_runtime.h>

#include <string>

namespace toy {
namespace {

void check_cuda(cudaError_t st, const char* what) {
  if (st != cudaSuccess)
    sdk::fail(EG_ERR_DEVICE, std::string(what) + ": " + cudaGetErrorString(st));
}

void check_kernel(int rc, const char* what) {
  if (rc != 0) sdk::fail(EG_ERR_DEVICE, std::string(what) + ": " + error_string(rc));
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int32_t device_index) {
    check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
  }
  bool on_cpu() const override { return false; }
  void forward(const Options& o, const ForwardCall& a, void* stream) const override {
    check_kernel(
        launch_forward(static_cast<const float*>(a.buffers[kX].data),
                       static_cast<const int32_t*>(a.buffers[kCuSeqlens].data),
                       static_cast<const int32_t*>(a.buffers[kNumSeqs].data),
                       static_cast<const float*>(a.buffers[kBias].data), a.shape.token_budget,
                       o.hidden, a.buffers[kCuSeqlens].shape[0] - 1, axis_scale(a.shape), a.out,
                       a.pooled, static_cast<int>(o.extra_kernels), a.workspace, stream),
        "toy forward kernel");
  }
  void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void* stream) const override {
    check_cuda(cudaMemsetAsync(dst + rows, 0xFF, static_cast<size_t>(capacity - rows) * 4,
                               static_cast<cudaStream_t>(stream)),
               "seq_id padding");
  }
  void copy(void* dst, const void* src, size_t bytes, void* stream) const override {
    if (bytes == 0) return;
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream)),
               "postprocess copy");
  }
  void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden,
                 void* stream) const override {
    check_kernel(launch_mean_rows(src, rows, hidden, dst, stream), "toy pooled kernel");
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int32_t device_index) {
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace toy
