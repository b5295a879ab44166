#include "toy_backend.hpp"

#include "toy_batch.hpp"

#include <encgraph/sdk/error.hpp>

#include <cstring>
#include <string>

#ifdef TOY_HAVE_CUDA
#include "toy_kernels.hpp"

#include <cuda_runtime.h>
#endif

namespace toy {

namespace sdk = encgraph::sdk;

namespace {

#ifdef TOY_HAVE_CUDA
void check_cuda(cudaError_t st, const char* what) {
  if (st != cudaSuccess)
    sdk::fail(EG_ERR_DEVICE, std::string(what) + ": " + cudaGetErrorString(st));
}
#else
[[noreturn]] void no_cuda() {
  sdk::fail(EG_ERR_UNSUPPORTED, "built without CUDA");
}
#endif

}  // namespace

Backend::Backend(int32_t device, int32_t device_index) : device_(device) {
#ifdef TOY_HAVE_CUDA
  if (device == EG_DEVICE_CUDA) check_cuda(cudaSetDevice(device_index), "cudaSetDevice");
#else
  if (device == EG_DEVICE_CUDA) no_cuda();
  (void)device_index;
#endif
}

void Backend::forward(const Options& o, const ForwardCall& a, void* stream) const {
  if (on_cpu()) {
    cpu_forward(o, a);
    return;
  }
#ifdef TOY_HAVE_CUDA
  const int rc =
      launch_forward(static_cast<const float*>(a.buffers[kX].data),
                     static_cast<const int32_t*>(a.buffers[kCuSeqlens].data),
                     static_cast<const int32_t*>(a.buffers[kNumSeqs].data),
                     static_cast<const float*>(a.buffers[kBias].data), a.shape.token_budget,
                     o.hidden, a.buffers[kCuSeqlens].shape[0] - 1, axis_scale(a.shape), a.out,
                     a.pooled, static_cast<int>(o.extra_kernels), a.workspace, stream);
  if (rc != 0) sdk::fail(EG_ERR_DEVICE, std::string("toy forward kernel: ") + error_string(rc));
#else
  (void)stream;
#endif
}

void Backend::pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void* stream) const {
  if (on_cpu()) {
    for (int64_t r = rows; r < capacity; ++r) dst[r] = -1;
    return;
  }
#ifdef TOY_HAVE_CUDA
  check_cuda(cudaMemsetAsync(dst + rows, 0xFF, static_cast<size_t>(capacity - rows) * 4,
                             static_cast<cudaStream_t>(stream)),
             "seq_id padding");
#else
  (void)stream;
#endif
}

void Backend::copy(void* dst, const void* src, size_t bytes, void* stream) const {
  if (bytes == 0) return;
  if (on_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef TOY_HAVE_CUDA
  check_cuda(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      "postprocess copy");
#else
  (void)stream;
  no_cuda();
#endif
}

void Backend::mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden,
                        void* stream) const {
  if (on_cpu()) {
    cpu_mean_rows(dst, src, rows, hidden);
    return;
  }
#ifdef TOY_HAVE_CUDA
  const int rc = launch_mean_rows(src, rows, hidden, dst, stream);
  if (rc != 0) sdk::fail(EG_ERR_DEVICE, std::string("toy pooled kernel: ") + error_string(rc));
#else
  (void)stream;
  no_cuda();
#endif
}

}  // namespace toy
