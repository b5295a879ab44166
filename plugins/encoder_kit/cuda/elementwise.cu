// Memory-bound kernels: norms, activations, rotary, row gather. Each moves its
// bytes once with 16-byte accesses where the shape allows (the vector paths);
// odd shapes fall back to element-wise paths that compute the same values.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "launch.cuh"
#include "rotary.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride loops cover the rest

unsigned blocks_for(int64_t items) {
  const int64_t b = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// N consecutive bf16 moved as one access of 2N bytes.
template <int N>
struct Raw;
template <>
struct Raw<8> {
  using T = uint4;
};
template <>
struct Raw<4> {
  using T = uint2;
};
template <>
struct Raw<2> {
  using T = unsigned int;
};
template <>
struct Raw<1> {
  using T = unsigned short;
};

template <int N>
__device__ __forceinline__ void load(const bf16* p, float (&f)[N]) {
  const typename Raw<N>::T raw = *reinterpret_cast<const typename Raw<N>::T*>(p);
  const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = __bfloat162float(e[i]);
}

template <int N>
__device__ __forceinline__ void store(bf16* p, const float (&f)[N]) {
  typename Raw<N>::T raw;
  bf16* e = reinterpret_cast<bf16*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) e[i] = __float2bfloat16(f[i]);
  *reinterpret_cast<typename Raw<N>::T*>(p) = raw;
}

using ptx::round_bf16;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- normalisations: one warp per row; later passes re-read the row from L1.

template <int V>
__global__ void rms_norm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                bf16* __restrict__ y, int64_t rows, int64_t cols, float eps) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const bf16* xr = x + row * cols;
  bf16* yr = y + row * cols;
  float ss = 0.0f;
  for (int64_t c = static_cast<int64_t>(lane) * V; c < cols; c += 32 * V) {
    float v[V];
    load<V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) ss += v[i] * v[i];
  }
  const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);
  for (int64_t c = static_cast<int64_t>(lane) * V; c < cols; c += 32 * V) {
    float v[V], g[V];
    load<V>(xr + c, v);
    load<V>(w + c, g);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = g[i] * round_bf16(v[i] * rstd);
    store<V>(yr + c, v);
  }
}

template <int V>
__global__ void layer_norm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                  const bf16* __restrict__ b, bf16* __restrict__ y, int64_t rows,
                                  int64_t cols, float eps) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const bf16* xr = x + row * cols;
  bf16* yr = y + row * cols;
  // Two passes for the variance: E[x^2] - mean^2 cancels badly when |mean| >> std.
  float sum = 0.0f;
  for (int64_t c = static_cast<int64_t>(lane) * V; c < cols; c += 32 * V) {
    float v[V];
    load<V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) sum += v[i];
  }
  const float mean = warp_sum(sum) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t c = static_cast<int64_t>(lane) * V; c < cols; c += 32 * V) {
    float v[V];
    load<V>(xr + c, v);
#pragma unroll
    for (int i = 0; i < V; ++i) sq += (v[i] - mean) * (v[i] - mean);
  }
  const float rstd = rsqrtf(warp_sum(sq) / static_cast<float>(cols) + eps);
  for (int64_t c = static_cast<int64_t>(lane) * V; c < cols; c += 32 * V) {
    float v[V], g[V], h[V];
    load<V>(xr + c, v);
    load<V>(w + c, g);
    if (b != nullptr) {
      load<V>(b + c, h);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) h[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = (v[i] - mean) * rstd * g[i] + h[i];
    store<V>(yr + c, v);
  }
}

// Rows of up to kResidentCols elements (8-aligned) stay in registers: every
// load of the row is issued before the first reduction, one memory round trip
// instead of one per 256 elements and pass. At a few hundred rows (one small
// image) the looped kernels above spent ~4.7 us a call on those round trips.
// Same summation order as the looped kernels, so the same results.
constexpr int kResidentChunks = 8;  // 16-byte chunks per lane
constexpr int64_t kResidentCols = 32 * 8 * kResidentChunks;

__device__ __forceinline__ void load_row_resident(const bf16* xr, int64_t cols, int lane,
                                                  float (&v)[kResidentChunks][8]) {
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * 8;
    if (c < cols) {
      load<8>(xr + c, v[k]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[k][i] = 0.0f;
    }
  }
}

__global__ void rms_norm_resident_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                         bf16* __restrict__ y, int64_t rows, int64_t cols,
                                         float eps) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  float v[kResidentChunks][8];
  load_row_resident(x + row * cols, cols, lane, v);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k)
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[k][i] * v[k][i];
  const float rstd = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);
  bf16* yr = y + row * cols;
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * 8;
    if (c >= cols) break;
    float g[8];
    load<8>(w + c, g);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[k][i] = g[i] * round_bf16(v[k][i] * rstd);
    store<8>(yr + c, v[k]);
  }
}

__global__ void layer_norm_resident_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                           const bf16* __restrict__ b, bf16* __restrict__ y,
                                           int64_t rows, int64_t cols, float eps) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  float v[kResidentChunks][8];
  load_row_resident(x + row * cols, cols, lane, v);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k)
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += v[k][i];
  const float mean = warp_sum(sum) / static_cast<float>(cols);
  // Two passes for the variance, as above; the padding chunks are skipped.
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k) {
    if (static_cast<int64_t>(lane + 32 * k) * 8 >= cols) break;
#pragma unroll
    for (int i = 0; i < 8; ++i) sq += (v[k][i] - mean) * (v[k][i] - mean);
  }
  const float rstd = rsqrtf(warp_sum(sq) / static_cast<float>(cols) + eps);
  bf16* yr = y + row * cols;
#pragma unroll
  for (int k = 0; k < kResidentChunks; ++k) {
    const int64_t c = static_cast<int64_t>(lane + 32 * k) * 8;
    if (c >= cols) break;
    float g[8], h[8];
    load<8>(w + c, g);
    if (b != nullptr) {
      load<8>(b + c, h);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) h[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) v[k][i] = (v[k][i] - mean) * rstd * g[i] + h[i];
    store<8>(yr + c, v[k]);
  }
}

// ---- element-wise over [rows, cols] views with leading dimensions.

template <int V>
__global__ void silu_mul_kernel(const bf16* __restrict__ gate, int64_t ld_gate,
                                const bf16* __restrict__ up, int64_t ld_up, bf16* __restrict__ y,
                                int64_t ld_y, int64_t rows, int64_t cols) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int64_t per_row = cols / V;
  const int64_t items = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / per_row;
    const int64_t c = (i - r * per_row) * V;
    float g[V], u[V];
    load<V>(gate + r * ld_gate + c, g);
    load<V>(up + r * ld_up + c, u);
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = round_bf16(g[k] / (1.0f + __expf(-g[k]))) * u[k];
    store<V>(y + r * ld_y + c, g);
  }
}

__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

template <int V, bool kTanh>
__global__ void gelu_kernel(const bf16* x, bf16* y, int64_t n) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int64_t items = n / V;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float v[V];
    load<V>(x + i * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = kTanh ? gelu_tanh(v[k]) : gelu_erf(v[k]);
    store<V>(y + i * V, v);
  }
}

template <int V>
__global__ void add_kernel(const bf16* a, const bf16* b, bf16* y, int64_t n) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int64_t items = n / V;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    float u[V], v[V];
    load<V>(a + i * V, u);
    load<V>(b + i * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) u[k] += v[k];
    store<V>(y + i * V, u);
  }
}

template <int V>
__global__ void gather_rows_kernel(const bf16* __restrict__ src, const int32_t* __restrict__ index,
                                   bf16* __restrict__ dst, int64_t rows, int64_t cols) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int64_t per_row = cols / V;
  const int64_t items = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / per_row;
    const int64_t c = (i - r * per_row) * V;
    const int32_t from = index[r];
    typename Raw<V>::T raw{};
    if (from >= 0) raw = *reinterpret_cast<const typename Raw<V>::T*>(src + from * cols + c);
    *reinterpret_cast<typename Raw<V>::T*>(dst + r * cols + c) = raw;
  }
}

// ---- rotary: one thread rotates V pairs (d, d + head_dim/2) of one head.

template <int V>
__global__ void rotary_kernel(bf16* __restrict__ qkv, int64_t tokens, int heads, int head_dim,
                              const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                              int64_t cs_stride) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  const int half = head_dim / 2;
  const int per_head = half / V;
  // Token slowest: neighbouring threads share one token's cos/sin row.
  const int64_t items = tokens * 2 * heads * per_head;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < items;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int v = static_cast<int>(i % per_head);
    int64_t rest = i / per_head;
    const int h = static_cast<int>(rest % heads);
    rest /= heads;
    const int which = static_cast<int>(rest % 2);  // 0: q, 1: k
    const int64_t t = rest / 2;
    bf16* p = qkv + (t * 3 + which) * heads * head_dim + static_cast<int64_t>(h) * head_dim + v * V;
    const float* c = cos_t + t * cs_stride + v * V;
    const float* s = sin_t + t * cs_stride + v * V;
    float x1[V], x2[V], o1[V], o2[V];
    load<V>(p, x1);
    load<V>(p + half, x2);
#pragma unroll
    for (int k = 0; k < V; ++k) detail::rotate_pair(x1[k], x2[k], c[k], s[k], o1[k], o2[k]);
    store<V>(p, o1);
    store<V>(p + half, o2);
  }
}

// Vector width usable for rows of `cols` elements starting at these pointers.
int vec_width(int64_t cols, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!detail::aligned16(p)) return 1;
  return cols % 8 == 0 ? 8 : 1;
}

}  // namespace

int rms_norm_bf16(const bf16* x, const bf16* w, bf16* y, int64_t rows, int64_t cols, float eps,
                  cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0);
  ENCODER_KIT_REQUIRE(x != nullptr && w != nullptr && y != nullptr);
  if (rows == 0) return 0;
  const unsigned grid = static_cast<unsigned>((rows + kThreads / 32 - 1) / (kThreads / 32));
  int err = 0;
  if (vec_width(cols, {x, w, y}) == 8 && cols <= kResidentCols)
    err = detail::launch_kernel(rms_norm_resident_kernel, dim3(grid), dim3(kThreads), 0, stream, x,
                                w, y, rows, cols, eps);
  else if (vec_width(cols, {x, w, y}) == 8)
    err = detail::launch_kernel(rms_norm_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, x, w, y,
                                rows, cols, eps);
  else
    err = detail::launch_kernel(rms_norm_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, x, w, y,
                                rows, cols, eps);
  return err;  // launch_kernel checked and recorded it
}

int layer_norm_bf16(const bf16* x, const bf16* w, const bf16* b, bf16* y, int64_t rows,
                    int64_t cols, float eps, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0);
  ENCODER_KIT_REQUIRE(x != nullptr && w != nullptr && y != nullptr);
  if (rows == 0) return 0;
  const unsigned grid = static_cast<unsigned>((rows + kThreads / 32 - 1) / (kThreads / 32));
  const void* bias_ptr = b != nullptr ? static_cast<const void*>(b) : static_cast<const void*>(w);
  int err = 0;
  if (vec_width(cols, {x, w, bias_ptr, y}) == 8 && cols <= kResidentCols)
    err = detail::launch_kernel(layer_norm_resident_kernel, dim3(grid), dim3(kThreads), 0, stream,
                                x, w, b, y, rows, cols, eps);
  else if (vec_width(cols, {x, w, bias_ptr, y}) == 8)
    err = detail::launch_kernel(layer_norm_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, x, w,
                                b, y, rows, cols, eps);
  else
    err = detail::launch_kernel(layer_norm_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, x, w,
                                b, y, rows, cols, eps);
  return err;  // launch_kernel checked and recorded it
}

int silu_mul_bf16(const bf16* gate, int64_t ld_gate, const bf16* up, int64_t ld_up, bf16* y,
                  int64_t ld_y, int64_t rows, int64_t cols, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols >= 0);
  ENCODER_KIT_REQUIRE(gate != nullptr && up != nullptr && y != nullptr);
  ENCODER_KIT_REQUIRE(ld_gate >= cols && ld_up >= cols && ld_y >= cols);
  if (rows == 0 || cols == 0) return 0;
  const bool vec =
      vec_width(cols, {gate, up, y}) == 8 && ld_gate % 8 == 0 && ld_up % 8 == 0 && ld_y % 8 == 0;
  const int v = vec ? 8 : 1;
  const unsigned grid = blocks_for(rows * (cols / v));
  int err = 0;
  if (vec)
    err = detail::launch_kernel(silu_mul_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, gate,
                                ld_gate, up, ld_up, y, ld_y, rows, cols);
  else
    err = detail::launch_kernel(silu_mul_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, gate,
                                ld_gate, up, ld_up, y, ld_y, rows, cols);
  return err;  // launch_kernel checked and recorded it
}

int gelu_bf16(const bf16* x, bf16* y, int64_t n, bool tanh_approximation, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(n >= 0 && x != nullptr && y != nullptr);
  if (n == 0) return 0;
  const int v = vec_width(n, {x, y});
  const unsigned grid = blocks_for(n / v);
  int err = 0;
  if (v == 8) {
    if (tanh_approximation)
      err = detail::launch_kernel(gelu_kernel<8, true>, dim3(grid), dim3(kThreads), 0, stream, x, y,
                                  n);
    else
      err = detail::launch_kernel(gelu_kernel<8, false>, dim3(grid), dim3(kThreads), 0, stream, x,
                                  y, n);
  } else {
    if (tanh_approximation)
      err = detail::launch_kernel(gelu_kernel<1, true>, dim3(grid), dim3(kThreads), 0, stream, x, y,
                                  n);
    else
      err = detail::launch_kernel(gelu_kernel<1, false>, dim3(grid), dim3(kThreads), 0, stream, x,
                                  y, n);
  }
  return err;  // launch_kernel checked and recorded it
}

int add_bf16(const bf16* a, const bf16* b, bf16* y, int64_t n, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(n >= 0 && a != nullptr && b != nullptr && y != nullptr);
  if (n == 0) return 0;
  const int v = vec_width(n, {a, b, y});
  const unsigned grid = blocks_for(n / v);
  int err = 0;
  if (v == 8)
    err = detail::launch_kernel(add_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, a, b, y, n);
  else
    err = detail::launch_kernel(add_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, a, b, y, n);
  return err;  // launch_kernel checked and recorded it
}

int gather_rows_bf16(const bf16* src, const int32_t* index, bf16* dst, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0);
  ENCODER_KIT_REQUIRE(src != nullptr && index != nullptr && dst != nullptr && src != dst);
  if (rows == 0) return 0;
  const int v = vec_width(cols, {src, dst});
  const unsigned grid = blocks_for(rows * (cols / v));
  int err = 0;
  if (v == 8)
    err = detail::launch_kernel(gather_rows_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, src,
                                index, dst, rows, cols);
  else
    err = detail::launch_kernel(gather_rows_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, src,
                                index, dst, rows, cols);
  return err;  // launch_kernel checked and recorded it
}

int rotary_bf16(bf16* qkv, int64_t tokens, int num_heads, int head_dim, const float* cos,
                const float* sin, int64_t cs_stride, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(tokens >= 0 && num_heads > 0 && head_dim > 0 && head_dim % 2 == 0);
  ENCODER_KIT_REQUIRE(qkv != nullptr && cos != nullptr && sin != nullptr);
  ENCODER_KIT_REQUIRE(cs_stride >= head_dim / 2);
  if (tokens == 0) return 0;
  const int half = head_dim / 2;
  // The widest access that keeps both halves of every head aligned.
  const auto a = reinterpret_cast<uintptr_t>(qkv);
  int v = 1;
  if (half % 8 == 0 && a % 16 == 0)
    v = 8;
  else if (half % 4 == 0 && a % 8 == 0)
    v = 4;
  else if (half % 2 == 0 && a % 4 == 0)
    v = 2;
  const unsigned grid = blocks_for(tokens * 2 * num_heads * (half / v));
  int err = 0;
  switch (v) {
    case 8:
      err = detail::launch_kernel(rotary_kernel<8>, dim3(grid), dim3(kThreads), 0, stream, qkv,
                                  tokens, num_heads, head_dim, cos, sin, cs_stride);
      break;
    case 4:
      err = detail::launch_kernel(rotary_kernel<4>, dim3(grid), dim3(kThreads), 0, stream, qkv,
                                  tokens, num_heads, head_dim, cos, sin, cs_stride);
      break;
    case 2:
      err = detail::launch_kernel(rotary_kernel<2>, dim3(grid), dim3(kThreads), 0, stream, qkv,
                                  tokens, num_heads, head_dim, cos, sin, cs_stride);
      break;
    default:
      err = detail::launch_kernel(rotary_kernel<1>, dim3(grid), dim3(kThreads), 0, stream, qkv,
                                  tokens, num_heads, head_dim, cos, sin, cs_stride);
  }
  return err;  // launch_kernel checked and recorded it
}

}  // namespace encoder_kit::cuda
