// The FP8 path's memory-bound kernels (fp8_gemm.hpp): per-row e4m3
// quantisation of bf16 activations, and the bias/GELU pass after an FP8
// product whose epilogue cuBLASLt does not fuse. The quantiser computes what
// fp8_e4m3.hpp's host reference computes, bit for bit: the same float
// division (IEEE-rounded __fdiv_rn whatever the flags) and the hardware's
// round-to-nearest-even, saturating conversion.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/fp8_gemm.hpp>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxRowsPerLaunch = int64_t{1} << 30;  // gridDim.x bound, with room

// One block per row: the row's amax (a block reduction), then its codes. The
// second pass reads the row again from L1/L2 (a row is a few KiB). Fusing the
// quantisation into the preceding norm or residual kernel would save both
// passes' extra traffic; this is the separate form.
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ q,
                         float* __restrict__ scale, int64_t cols) {
  const int64_t row = blockIdx.x;
  const bf16* xr = x + row * cols;
  uint8_t* qr = q + row * cols;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    amax = fmaxf(amax, fabsf(__bfloat162float(xr[c])));
#pragma unroll
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  __shared__ float warp_max[kWarps];
  __shared__ float row_scale;
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = warp_max[0];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, warp_max[w]);
    row_scale = __fdiv_rn(fmaxf(m, kFp8AmaxFloor), kE4m3Max);
    scale[row] = row_scale;
  }
  __syncthreads();
  const float s = row_scale;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads)
    qr[c] = __nv_cvt_float_to_fp8(__fdiv_rn(__bfloat162float(xr[c]), s), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float apply(float v, Fp8Act act) {
  switch (act) {
    case Fp8Act::None: return v;
    case Fp8Act::GeluErf: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case Fp8Act::GeluTanh:
      return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

__global__ void __launch_bounds__(kThreads)
    bias_act_kernel(bf16* __restrict__ y, const bf16* __restrict__ bias, int64_t total,
                    int64_t cols, Fp8Act act) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += stride) {
    float v = __bfloat162float(y[i]);
    if (bias != nullptr) v += __bfloat162float(bias[i % cols]);
    y[i] = __float2bfloat16(apply(v, act));
  }
}

}  // namespace

int quantize_rows_e4m3(const bf16* x, uint8_t* q, float* scale, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && rows <= kMaxRowsPerLaunch);
  ENCODER_KIT_REQUIRE(x != nullptr && q != nullptr && scale != nullptr);
  if (rows == 0) return 0;
  quantize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, q, scale, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int bias_act_bf16(bf16* y, const bf16* bias, int64_t rows, int64_t cols, Fp8Act act,
                  cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && y != nullptr);
  ENCODER_KIT_REQUIRE(bias != nullptr || act != Fp8Act::None);
  const int64_t total = rows * cols;
  if (total == 0) return 0;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid =
      static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : int64_t{1} << 20);
  bias_act_kernel<<<grid, kThreads, 0, stream>>>(y, bias, total, cols, act);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace encoder_kit::cuda
