#include "llava_kernels.hpp"

namespace llava_onevision::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridBlocks = 1 << 16;

// One thread per 8 values of an output row.
__global__ void pack_rows_vec8(const uint4* projected, const uint4* newline, const int32_t* src,
                               const float* weight, uint4* out, int64_t rows, int taps,
                               int64_t vec_cols) {
  const int64_t total = rows * vec_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vec_cols, c = i - r * vec_cols;
    float acc[8] = {};
    for (int k = 0; k < taps; ++k) {
      const float w = weight[r * taps + k];
      if (w == 0.0f) continue;
      const int32_t s = src[r * taps + k];
      const uint4 v = s < 0 ? newline[c] : projected[s * vec_cols + c];
      const auto* va = reinterpret_cast<const bf16*>(&v);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += w * __bfloat162float(va[e]);
    }
    uint4 y;
    auto* ya = reinterpret_cast<bf16*>(&y);
#pragma unroll
    for (int e = 0; e < 8; ++e) ya[e] = __float2bfloat16(acc[e]);
    out[i] = y;
  }
}

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

int pack_rows_bf16(const bf16* projected, const bf16* newline, const int32_t* src,
                   const float* weight, bf16* out, int64_t rows, int taps, int64_t cols,
                   cudaStream_t stream) {
  if (cols % 8 != 0 || taps < 1 || !aligned(projected) || !aligned(newline) || !aligned(out))
    return cudaErrorInvalidValue;
  const int64_t work = rows * (cols / 8);
  if (work == 0) return cudaSuccess;
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  pack_rows_vec8<<<static_cast<int>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks), kThreads, 0,
                   stream>>>(reinterpret_cast<const uint4*>(projected),
                             reinterpret_cast<const uint4*>(newline), src, weight,
                             reinterpret_cast<uint4*>(out), rows, taps, cols / 8);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace llava_onevision::cuda
