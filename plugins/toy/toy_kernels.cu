// CUDA side of the toy plugins: toy_model.cpp's cpu_forward on the device (the
// rows and the pooled row of each sequence), the mean of an item's rows for
// toy_dual's post-processing, plus optional tiny kernels that make a forward
// launch-bound (for the manager's overhead benchmark).
#include "toy_kernels.hpp"

#include <cuda_runtime.h>

namespace toy {
namespace {

// One block per sequence slot; the last block zeroes the padded rows. Threads
// run over the hidden dimension and walk rows in order (a prefix sum).
__global__ void forward_kernel(const float* __restrict__ x, const int32_t* __restrict__ cu,
                               const int32_t* __restrict__ num_seqs, const float* __restrict__ bias,
                               int64_t budget, int64_t hidden, int64_t max_seqs, float scale,
                               float* __restrict__ out, float* __restrict__ pooled) {
  const int32_t n = *num_seqs;
  const int64_t s = blockIdx.x;
  const int64_t d = threadIdx.x;
  if (d >= hidden) return;
  if (s == max_seqs) {  // padding rows
    const int64_t first = n >= 0 && n <= max_seqs ? cu[n] : 0;
    for (int64_t r = first; r < budget; ++r) out[r * hidden + d] = 0.0f;
    return;
  }
  if (s >= n) {  // an empty sequence slot: its pooled row is zero
    if (pooled) pooled[s * hidden + d] = 0.0f;
    return;
  }
  const float b = *bias;
  float acc = 0.0f, sum = 0.0f;
  const int32_t start = cu[s], end = cu[s + 1];
  for (int64_t r = start; r < end; ++r) {
    acc += x[r * hidden + d];
    const float v =
        b + scale * acc + 0.001f * static_cast<float>(r - start) + 0.01f * static_cast<float>(d);
    out[r * hidden + d] = v;
    sum += v;
  }
  if (pooled) pooled[s * hidden + d] = end > start ? sum / static_cast<float>(end - start) : 0.0f;
}

__global__ void mean_rows_kernel(const float* __restrict__ src, int64_t rows, int64_t hidden,
                                 float* __restrict__ dst) {
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (d >= hidden) return;
  float sum = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sum += src[r * hidden + d];
  dst[d] = sum / static_cast<float>(rows);
}

__global__ void tiny_kernel(float* slot) {
  *slot += 1.0f;
}

}  // namespace

int launch_forward(const float* x, const int32_t* cu_seqlens, const int32_t* num_seqs,
                   const float* bias, int64_t budget, int64_t hidden, int64_t max_seqs,
                   float axis_scale, float* out, float* pooled, int extra_kernels, float* scratch,
                   void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (hidden > 1024) return static_cast<int>(cudaErrorInvalidValue);
  const unsigned threads = static_cast<unsigned>(((hidden + 31) / 32) * 32);
  forward_kernel<<<static_cast<unsigned>(max_seqs + 1), threads, 0, s>>>(
      x, cu_seqlens, num_seqs, bias, budget, hidden, max_seqs, axis_scale, out, pooled);
  cudaError_t st = cudaGetLastError();
  if (st != cudaSuccess) return static_cast<int>(st);
  for (int k = 0; k < extra_kernels; ++k) {
    tiny_kernel<<<1, 1, 0, s>>>(scratch + k);
    st = cudaGetLastError();
    if (st != cudaSuccess) return static_cast<int>(st);
  }
  return 0;
}

int launch_mean_rows(const float* src, int64_t rows, int64_t hidden, float* dst, void* stream) {
  if (rows <= 0 || hidden <= 0) return static_cast<int>(cudaErrorInvalidValue);
  const unsigned threads = 128;
  const unsigned blocks = static_cast<unsigned>((hidden + threads - 1) / threads);
  mean_rows_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(src, rows, hidden,
                                                                              dst);
  return static_cast<int>(cudaGetLastError());
}

const char* error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // namespace toy
