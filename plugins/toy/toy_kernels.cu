// CUDA side of the toy plugin: the forward of toy_plugin.cpp on the device, plus
// optional tiny kernels that make a forward launch-bound (for the manager's
// overhead benchmark).
#include "toy_kernels.hpp"

#include <cuda_runtime.h>

namespace toy {
namespace {

// One block per sequence slot; the last block zeroes the padded rows. Threads
// run over the hidden dimension and walk rows in order (a prefix sum).
__global__ void forward_kernel(const float* __restrict__ x, const int32_t* __restrict__ cu,
                               const int32_t* __restrict__ num_seqs, const float* __restrict__ bias,
                               int64_t budget, int64_t hidden, int64_t max_seqs, float scale,
                               float* __restrict__ out) {
  const int32_t n = *num_seqs;
  const int64_t s = blockIdx.x;
  const int64_t d = threadIdx.x;
  if (d >= hidden) return;
  if (s == max_seqs) {  // padding rows
    const int64_t first = n >= 0 && n <= max_seqs ? cu[n] : 0;
    for (int64_t r = first; r < budget; ++r) out[r * hidden + d] = 0.0f;
    return;
  }
  if (s >= n) return;
  const float b = *bias;
  float acc = 0.0f;
  const int32_t start = cu[s], end = cu[s + 1];
  for (int64_t r = start; r < end; ++r) {
    acc += x[r * hidden + d];
    out[r * hidden + d] =
        b + scale * acc + 0.001f * static_cast<float>(r - start) + 0.01f * static_cast<float>(d);
  }
}

__global__ void tiny_kernel(float* slot) {
  *slot += 1.0f;
}

}  // namespace

int launch_forward(const float* x, const int32_t* cu_seqlens, const int32_t* num_seqs,
                   const float* bias, int64_t budget, int64_t hidden, int64_t max_seqs,
                   float axis_scale, float* out, int extra_kernels, float* scratch, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (hidden > 1024) return static_cast<int>(cudaErrorInvalidValue);
  const unsigned threads = static_cast<unsigned>(((hidden + 31) / 32) * 32);
  forward_kernel<<<static_cast<unsigned>(max_seqs + 1), threads, 0, s>>>(
      x, cu_seqlens, num_seqs, bias, budget, hidden, max_seqs, axis_scale, out);
  cudaError_t st = cudaGetLastError();
  if (st != cudaSuccess) return static_cast<int>(st);
  for (int k = 0; k < extra_kernels; ++k) {
    tiny_kernel<<<1, 1, 0, s>>>(scratch + k);
    st = cudaGetLastError();
    if (st != cudaSuccess) return static_cast<int>(st);
  }
  return 0;
}

int illegal_sync(void* stream) {
  (void)stream;
  return static_cast<int>(cudaDeviceSynchronize());
}

const char* error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace toy
