// The FP8 products' activation operands (fp8.hpp): one block per row,
// 16-byte loads of 8 bf16 and 8-byte stores of 8 codes. A row of up to
// kHeldRowCols columns is read once and held in registers while the block
// finds its maximum; a longer row takes two passes (the maximum, then the
// codes from a second read).
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/fp8.hpp>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace encoder_kit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kMax = 448.0f;  // e4m3's largest finite value

__device__ __forceinline__ void load8(const bf16* p, float (&f)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ __forceinline__ void store8(e4m3* p, const float (&f)[8], float inv) {
  uint2 raw;
  uint16_t* pairs = reinterpret_cast<uint16_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    pairs[i] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * i] * inv, f[2 * i + 1] * inv),
                                        __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint2*>(p) = raw;
}

// Block-wide max of a (NaN-free) value and sum of another, plus an "any not
// finite" flag; every thread gets the results.
struct RowStats {
  float amax, sumsq;
  bool bad;
};
__device__ RowStats reduce(float amax, float sumsq, bool bad) {
  __shared__ float s_max[kThreads / 32], s_sum[kThreads / 32];
  __shared__ int s_bad[kThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    sumsq += __shfl_xor_sync(0xffffffffu, sumsq, o);
  }
  const int any_bad = __any_sync(0xffffffffu, bad);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    s_max[warp] = amax;
    s_sum[warp] = sumsq;
    s_bad[warp] = any_bad;
  }
  __syncthreads();
  RowStats r{0.0f, 0.0f, false};
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) {
    r.amax = fmaxf(r.amax, s_max[w]);
    r.sumsq += s_sum[w];
    r.bad = r.bad || s_bad[w] != 0;
  }
  __syncthreads();  // the shared slots are reused by the next row
  return r;
}

__device__ __forceinline__ float row_scale_inv(const RowStats& st, float& scale) {
  if (st.bad) {
    scale = __int_as_float(0x7fc00000);  // NaN: the row's product shows it
    return scale;                        // NaN codes too
  }
  scale = st.amax > 0.0f ? st.amax / kMax : 1.0f;
  return st.amax > 0.0f ? kMax / st.amax : 1.0f;
}

__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const bf16* __restrict__ x, int64_t ld_x, e4m3* __restrict__ q,
                         float* __restrict__ scale_out, int64_t rows, int64_t cols, float rms_eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* row = x + r * ld_x;
    float amax = 0.0f, sumsq = 0.0f;
    bool bad = false;
    for (int64_t c = threadIdx.x * 8; c < cols; c += kThreads * 8) {
      float f[8];
      load8(row + c, f);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        bad = bad || !isfinite(f[i]);
        amax = fmaxf(amax, fabsf(f[i]));
        sumsq += f[i] * f[i];
      }
    }
    const RowStats st = reduce(amax, sumsq, bad);
    float scale = 0.0f;
    const float inv = row_scale_inv(st, scale);
    for (int64_t c = threadIdx.x * 8; c < cols; c += kThreads * 8) {
      float f[8];
      load8(row + c, f);
      store8(q + r * cols + c, f, inv);
    }
    if (threadIdx.x == 0)
      scale_out[r] =
          rms_eps >= 0.0f ? scale * rsqrtf(st.sumsq / static_cast<float>(cols) + rms_eps) : scale;
  }
}

// act[f] of a blocked [gate | up] row, for 8 features from f (one block).
__device__ __forceinline__ void silu_mul8(const bf16* row, int64_t f, float (&a)[8]) {
  const int64_t blk = f / kGateUpBlock, i = f % kGateUpBlock;
  float g[8], u[8];
  load8(row + blk * 2 * kGateUpBlock + i, g);
  load8(row + blk * 2 * kGateUpBlock + kGateUpBlock + i, u);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    // As the bf16 module rounds: silu(gate) to bf16, then the product.
    const float s = __bfloat162float(__float2bfloat16(g[j] / (1.0f + __expf(-g[j]))));
    a[j] = __bfloat162float(__float2bfloat16(s * u[j]));
  }
}

__global__ void __launch_bounds__(kThreads)
    silu_mul_quantize_kernel(const bf16* __restrict__ gate_up, e4m3* __restrict__ q,
                             float* __restrict__ scale_out, int64_t rows, int64_t inter) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* row = gate_up + r * 2 * inter;
    float amax = 0.0f;
    bool bad = false;
    for (int64_t f = threadIdx.x * 8; f < inter; f += kThreads * 8) {
      float a[8];
      silu_mul8(row, f, a);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        bad = bad || !isfinite(a[j]);
        amax = fmaxf(amax, fabsf(a[j]));
      }
    }
    const RowStats st = reduce(amax, 0.0f, bad);
    float scale = 0.0f;
    const float inv = row_scale_inv(st, scale);
    for (int64_t f = threadIdx.x * 8; f < inter; f += kThreads * 8) {
      float a[8];
      silu_mul8(row, f, a);
      store8(q + r * inter + f, a, inv);
    }
    if (threadIdx.x == 0) scale_out[r] = scale;
  }
}

// A held row's codes: thread t's vectors t, t + blockDim, ... of n values.
template <int kChunks>
__device__ __forceinline__ void store_held(e4m3* q_row, const float (&v)[kChunks][8], int64_t n,
                                           float inv) {
#pragma unroll
  for (int ch = 0; ch < kChunks; ++ch) {
    const int64_t c = (int64_t{ch} * blockDim.x + threadIdx.x) * 8;
    if (c < n) store8(q_row + c, v[ch], inv);
  }
}

// What a held row is before its codes: as read, centred (the row minus its
// mean; the scale carries the LayerNorm's rstd, from a second reduction over
// the centred values), or through the exact GELU, rounded to bf16 as
// gelu_bf16 writes it.
enum class Held { Plain, Centred, Gelu };

// The single-pass forms: thread t holds vectors t, t + blockDim, ... (kChunks
// of them, 8 values each) of its row between the reduction and the stores.
template <int kChunks, Held kForm>
__global__ void __launch_bounds__(kThreads)
    quantize_rows_held_kernel(const bf16* __restrict__ x, int64_t ld_x, e4m3* __restrict__ q,
                              float* __restrict__ scale_out, int64_t rows, int64_t cols,
                              float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* row = x + r * ld_x;
    float f[kChunks][8];
    float amax = 0.0f, sumsq = 0.0f, sum = 0.0f;
    bool bad = false;
#pragma unroll
    for (int ch = 0; ch < kChunks; ++ch) {
      const int64_t c = (int64_t{ch} * blockDim.x + threadIdx.x) * 8;
      if (c < cols) {
        load8(row + c, f[ch]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if constexpr (kForm == Held::Gelu)
            f[ch][i] = __bfloat162float(
                __float2bfloat16(0.5f * f[ch][i] * (1.0f + erff(f[ch][i] * 0.70710678118654752f))));
          sum += f[ch][i];
        }
      }
    }
    if constexpr (kForm == Held::Centred) {
      const float mean = reduce(0.0f, sum, false).sumsq / static_cast<float>(cols);
#pragma unroll
      for (int ch = 0; ch < kChunks; ++ch)
        if ((int64_t{ch} * blockDim.x + threadIdx.x) * 8 < cols)
#pragma unroll
          for (int i = 0; i < 8; ++i) f[ch][i] -= mean;
    }
#pragma unroll
    for (int ch = 0; ch < kChunks; ++ch) {
      const int64_t c = (int64_t{ch} * blockDim.x + threadIdx.x) * 8;
      if (c < cols) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          bad = bad || !isfinite(f[ch][i]);
          amax = fmaxf(amax, fabsf(f[ch][i]));
          sumsq += f[ch][i] * f[ch][i];
        }
      }
    }
    const RowStats st = reduce(amax, sumsq, bad);
    float scale = 0.0f;
    store_held(q + r * cols, f, cols, row_scale_inv(st, scale));
    if (threadIdx.x == 0)
      scale_out[r] =
          eps >= 0.0f ? scale * rsqrtf(st.sumsq / static_cast<float>(cols) + eps) : scale;
  }
}

template <int kChunks>
__global__ void __launch_bounds__(kThreads)
    silu_mul_quantize_held_kernel(const bf16* __restrict__ gate_up, e4m3* __restrict__ q,
                                  float* __restrict__ scale_out, int64_t rows, int64_t inter) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* row = gate_up + r * 2 * inter;
    float a[kChunks][8];
    float amax = 0.0f;
    bool bad = false;
#pragma unroll
    for (int ch = 0; ch < kChunks; ++ch) {
      const int64_t f = (int64_t{ch} * blockDim.x + threadIdx.x) * 8;
      if (f < inter) {
        silu_mul8(row, f, a[ch]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          bad = bad || !isfinite(a[ch][j]);
          amax = fmaxf(amax, fabsf(a[ch][j]));
        }
      }
    }
    const RowStats st = reduce(amax, 0.0f, bad);
    float scale = 0.0f;
    store_held(q + r * inter, a, inter, row_scale_inv(st, scale));
    if (threadIdx.x == 0) scale_out[r] = scale;
  }
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
}

// A held row's launch: the fewest laps of at most kThreads threads that cover
// its vectors of 8, and the fewest whole warps per lap.
struct HeldLaunch {
  int chunks;
  unsigned threads;
};
HeldLaunch held_launch(int64_t cols) {
  const int64_t vectors = cols / 8;
  const int64_t chunks = (vectors + kThreads - 1) / kThreads;
  const int64_t per_lap = (vectors + chunks - 1) / chunks;
  return {static_cast<int>(chunks), static_cast<unsigned>((per_lap + 31) / 32 * 32)};
}

// Launches the instance `pick` returns for the row's lap count (pick takes
// std::integral_constant<int, kChunks>).
template <typename Pick, typename... Args>
void launch_held(const HeldLaunch& h, int64_t rows, cudaStream_t stream, Pick pick, Args... args) {
  const auto go = [&](auto kernel) { kernel<<<row_blocks(rows), h.threads, 0, stream>>>(args...); };
  switch (h.chunks) {
    case 1: go(pick(std::integral_constant<int, 1>{})); break;
    case 2: go(pick(std::integral_constant<int, 2>{})); break;
    case 3: go(pick(std::integral_constant<int, 3>{})); break;
    default: go(pick(std::integral_constant<int, 4>{})); break;
  }
}

static_assert(detail::kHeldRowCols == 4 * kThreads * 8, "four laps of the block at most");

}  // namespace

int quantize_rows_e4m3(const bf16* x, int64_t ld_x, e4m3* q, float* scale, int64_t rows,
                       int64_t cols, float rms_eps, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && cols % 16 == 0);
  ENCODER_KIT_REQUIRE(ld_x >= cols && ld_x % 8 == 0);
  ENCODER_KIT_REQUIRE(x != nullptr && q != nullptr && scale != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(x) && detail::aligned16(q));
  if (rows == 0) return 0;
  if (cols <= detail::kHeldRowCols)
    launch_held(
        held_launch(cols), rows, stream,
        [](auto laps) { return quantize_rows_held_kernel<decltype(laps)::value, Held::Plain>; }, x,
        ld_x, q, scale, rows, cols, rms_eps);
  else
    quantize_rows_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(x, ld_x, q, scale, rows, cols,
                                                                    rms_eps);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int silu_mul_quantize_e4m3(const bf16* gate_up, e4m3* q, float* scale, int64_t rows, int64_t inter,
                           cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && inter > 0 && inter % kGateUpBlock == 0);
  ENCODER_KIT_REQUIRE(gate_up != nullptr && q != nullptr && scale != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(gate_up) && detail::aligned16(q));
  if (rows == 0) return 0;
  if (inter <= detail::kHeldRowCols)
    launch_held(
        held_launch(inter), rows, stream,
        [](auto laps) { return silu_mul_quantize_held_kernel<decltype(laps)::value>; }, gate_up, q,
        scale, rows, inter);
  else
    silu_mul_quantize_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(gate_up, q, scale, rows,
                                                                        inter);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int quantize_centred_rows_e4m3(const bf16* x, int64_t ld_x, e4m3* q, float* scale, int64_t rows,
                               int64_t cols, float ln_eps, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && cols % 16 == 0 && cols <= detail::kHeldRowCols);
  ENCODER_KIT_REQUIRE(ld_x >= cols && ld_x % 8 == 0 && ln_eps >= 0.0f);
  ENCODER_KIT_REQUIRE(x != nullptr && q != nullptr && scale != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(x) && detail::aligned16(q));
  if (rows == 0) return 0;
  launch_held(
      held_launch(cols), rows, stream,
      [](auto laps) { return quantize_rows_held_kernel<decltype(laps)::value, Held::Centred>; }, x,
      ld_x, q, scale, rows, cols, ln_eps);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int gelu_quantize_rows_e4m3(const bf16* x, e4m3* q, float* scale, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && cols % 16 == 0 && cols <= detail::kHeldRowCols);
  ENCODER_KIT_REQUIRE(x != nullptr && q != nullptr && scale != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(x) && detail::aligned16(q));
  if (rows == 0) return 0;
  launch_held(
      held_launch(cols), rows, stream,
      [](auto laps) { return quantize_rows_held_kernel<decltype(laps)::value, Held::Gelu>; }, x,
      cols, q, scale, rows, cols, -1.0f);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace encoder_kit::cuda
