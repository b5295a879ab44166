// Kernels of dsocr2_kernels.hpp: plain grid-stride loops (one element or one
// 8-wide vector per step), all memory-bound. The attention is the kit's
// (encoder_kit/cuda/attention.hpp, AttentionExtras).
#include "dsocr2_kernels.hpp"

#include <encoder_kit/cuda/check.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace dsocr2::cuda {
namespace {

using encoder_kit::cuda::detail::aligned16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

unsigned blocks_for(int64_t items) {
  const int64_t b = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

#define DSOCR2_GRID_LOOP(i, n)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// V consecutive bf16 as one access (V = 8: 16 bytes; V = 1: 2 bytes).
template <int V>
struct Vec {
  bf16 e[V];
};
template <int V>
__device__ __forceinline__ Vec<V> load_vec(const bf16* p) {
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    return *reinterpret_cast<const Vec<8>*>(&raw);
  } else {
    Vec<V> r;
#pragma unroll
    for (int i = 0; i < V; ++i) r.e[i] = p[i];
    return r;
  }
}
template <int V>
__device__ __forceinline__ void store_vec(bf16* p, const Vec<V>& v) {
  if constexpr (V == 8) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = v.e[i];
  }
}
template <int V>
__device__ __forceinline__ Vec<V> zero_vec() {
  Vec<V> r;
#pragma unroll
  for (int i = 0; i < V; ++i) r.e[i] = __float2bfloat16(0.0f);
  return r;
}

// ---------------------------------------------------------------- im2col

__global__ void patch_im2col_kernel(const bf16* __restrict__ px, int64_t views, int side, int p,
                                    bf16* __restrict__ cols) {
  const int g = side / p, pp = p * p, k = 3 * pp;
  const int64_t n = views * g * g * k;
  DSOCR2_GRID_LOOP(i, n) {
    const int col = static_cast<int>(i % k);
    const int64_t row = i / k;
    const int64_t v = row / (static_cast<int64_t>(g) * g);
    const int cell = static_cast<int>(row - v * g * g);
    const int y = cell / g, x = cell % g;
    const int c = col / pp, ky = (col % pp) / p, kx = col % p;
    cols[i] = px[((v * 3 + c) * side + (y * p + ky)) * static_cast<int64_t>(side) + x * p + kx];
  }
}

template <int V>
__global__ void conv3x3_im2col_kernel(const bf16* __restrict__ x, int64_t views, int h, int w,
                                      int cin, int stride, bf16* __restrict__ cols) {
  const int ho = (h - 1) / stride + 1, wo = (w - 1) / stride + 1;
  const int per_row = 9 * cin / V;
  const int64_t n = views * ho * wo * per_row;
  DSOCR2_GRID_LOOP(i, n) {
    const int64_t row = i / per_row;
    const int col = static_cast<int>(i - row * per_row) * V;
    const int tap = col / cin, c = col % cin;  // (ky, kx, c) order; V divides cin
    const int ky = tap / 3, kx = tap % 3;
    const int64_t v = row / (static_cast<int64_t>(ho) * wo);
    const int cell = static_cast<int>(row - v * ho * wo);
    const int iy = (cell / wo) * stride - 1 + ky, ix = (cell % wo) * stride - 1 + kx;
    Vec<V> val = zero_vec<V>();
    if (iy >= 0 && iy < h && ix >= 0 && ix < w)
      val = load_vec<V>(x + ((v * h + iy) * w + ix) * static_cast<int64_t>(cin) + c);
    store_vec<V>(cols + row * 9 * static_cast<int64_t>(cin) + col, val);
  }
}

// ---------------------------------------------------------------- rows

template <int V>
__global__ void add_periodic_kernel(bf16* __restrict__ x, const bf16* __restrict__ pos,
                                    int64_t rows, int64_t period, int64_t cols) {
  const int64_t per_row = cols / V, n = rows * per_row;
  DSOCR2_GRID_LOOP(i, n) {
    const int64_t r = i / per_row, c = (i - r * per_row) * V;
    Vec<V> a = load_vec<V>(x + r * cols + c);
    const Vec<V> b = load_vec<V>(pos + (r % period) * cols + c);
#pragma unroll
    for (int k = 0; k < V; ++k)
      a.e[k] = __float2bfloat16(__bfloat162float(a.e[k]) + __bfloat162float(b.e[k]));
    store_vec<V>(x + r * cols + c, a);
  }
}

template <int V>
__global__ void window_partition_kernel(const bf16* __restrict__ x, bf16* __restrict__ out,
                                        int64_t views, int g, int win, int64_t cols) {
  const int per = (g + win - 1) / win, ww = win * win;
  const int64_t view_rows = static_cast<int64_t>(per) * per * ww;
  const int64_t per_row = cols / V, n = views * view_rows * per_row;
  DSOCR2_GRID_LOOP(i, n) {
    const int64_t r = i / per_row, c = (i - r * per_row) * V;
    const int64_t v = r / view_rows;
    const int rem = static_cast<int>(r - v * view_rows);
    const int wi = rem / ww, cell = rem % ww;
    const int yy = (wi / per) * win + cell / win, xx = (wi % per) * win + cell % win;
    Vec<V> val = zero_vec<V>();
    if (yy < g && xx < g) val = load_vec<V>(x + ((v * g + yy) * g + xx) * cols + c);
    store_vec<V>(out + r * cols + c, val);
  }
}

template <int V>
__global__ void window_unpartition_add_kernel(bf16* __restrict__ x, const bf16* __restrict__ w,
                                              int64_t views, int g, int win, int64_t cols) {
  const int per = (g + win - 1) / win, ww = win * win;
  const int64_t view_rows = static_cast<int64_t>(per) * per * ww, gg = static_cast<int64_t>(g) * g;
  const int64_t per_row = cols / V, n = views * gg * per_row;
  DSOCR2_GRID_LOOP(i, n) {
    const int64_t t = i / per_row, c = (i - t * per_row) * V;
    const int64_t v = t / gg;
    const int cell = static_cast<int>(t - v * gg), y = cell / g, xx = cell % g;
    const int64_t r =
        v * view_rows + ((y / win) * per + xx / win) * ww + (y % win) * win + xx % win;
    Vec<V> a = load_vec<V>(x + t * cols + c);
    const Vec<V> b = load_vec<V>(w + r * cols + c);
#pragma unroll
    for (int k = 0; k < V; ++k)
      a.e[k] = __float2bfloat16(__bfloat162float(a.e[k]) + __bfloat162float(b.e[k]));
    store_vec<V>(x + t * cols + c, a);
  }
}

template <int V>
__global__ void copy_view_rows_kernel(const bf16* __restrict__ src, int64_t src_view_rows,
                                      int64_t src_off, bf16* __restrict__ dst,
                                      int64_t dst_view_rows, int64_t dst_off, int64_t rows,
                                      int64_t views, int64_t cols) {
  const int64_t per_row = cols / V, n = views * rows * per_row;
  DSOCR2_GRID_LOOP(i, n) {
    const int64_t r = i / per_row, c = (i - r * per_row) * V;
    const int64_t v = r / rows, k = r - v * rows;
    store_vec<V>(dst + (v * dst_view_rows + dst_off + k) * cols + c,
                 load_vec<V>(src + (v * src_view_rows + src_off + k) * cols + c));
  }
}

// ---------------------------------------------------------------- rotary

__global__ void rotary_rows_kernel(bf16* __restrict__ x, int64_t row_stride, int64_t rows,
                                   int period, int heads, int hd, const float* __restrict__ cos_t,
                                   const float* __restrict__ sin_t) {
  const int half = hd / 2;
  const int64_t n = rows * heads * half;
  DSOCR2_GRID_LOOP(i, n) {
    const int d = static_cast<int>(i % half);
    const int64_t rh = i / half;
    const int head = static_cast<int>(rh % heads);
    const int64_t r = rh / heads;
    const int pos = static_cast<int>(r % period);
    bf16* p = x + r * row_stride + static_cast<int64_t>(head) * hd;
    const float c = cos_t[static_cast<int64_t>(pos) * half + d];
    const float s = sin_t[static_cast<int64_t>(pos) * half + d];
    const float x1 = __bfloat162float(p[d]), x2 = __bfloat162float(p[d + half]);
    p[d] = __float2bfloat16(x1 * c - x2 * s);
    p[d + half] = __float2bfloat16(x2 * c + x1 * s);
  }
}

// Vector width 8 when every pointer is 16-byte aligned and rows are whole vectors.
bool vec8(int64_t cols, std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return cols % 8 == 0;
}

}  // namespace

int patch_im2col_bf16(const bf16* pixels, int64_t views, int side, int patch, bf16* cols,
                      cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(pixels != nullptr && cols != nullptr && views >= 0);
  ENCODER_KIT_REQUIRE(patch > 0 && side > 0 && side % patch == 0);
  const int64_t g = side / patch;
  const int64_t n = views * g * g * 3 * patch * patch;
  if (n == 0) return 0;
  patch_im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(pixels, views, side, patch, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int add_periodic_rows_bf16(bf16* x, const bf16* pos, int64_t rows, int64_t period, int64_t cols,
                           cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(x != nullptr && pos != nullptr && rows >= 0 && period > 0 && cols > 0);
  if (rows == 0) return 0;
  if (vec8(cols, {x, pos}))
    add_periodic_kernel<8>
        <<<blocks_for(rows * cols / 8), kThreads, 0, stream>>>(x, pos, rows, period, cols);
  else
    add_periodic_kernel<1>
        <<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, pos, rows, period, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int window_partition_bf16(const bf16* x, bf16* out, int64_t views, int g, int win, int64_t cols,
                          cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(x != nullptr && out != nullptr && x != out);
  ENCODER_KIT_REQUIRE(views >= 0 && g > 0 && win > 0 && cols > 0);
  const int64_t per = (g + win - 1) / win;
  const int64_t n = views * per * per * win * win * cols;
  if (n == 0) return 0;
  if (vec8(cols, {x, out}))
    window_partition_kernel<8>
        <<<blocks_for(n / 8), kThreads, 0, stream>>>(x, out, views, g, win, cols);
  else
    window_partition_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(x, out, views, g, win, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int window_unpartition_add_bf16(bf16* x, const bf16* w, int64_t views, int g, int win, int64_t cols,
                                cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(x != nullptr && w != nullptr && x != w);
  ENCODER_KIT_REQUIRE(views >= 0 && g > 0 && win > 0 && cols > 0);
  const int64_t n = views * g * g * cols;
  if (n == 0) return 0;
  if (vec8(cols, {x, w}))
    window_unpartition_add_kernel<8>
        <<<blocks_for(n / 8), kThreads, 0, stream>>>(x, w, views, g, win, cols);
  else
    window_unpartition_add_kernel<1>
        <<<blocks_for(n), kThreads, 0, stream>>>(x, w, views, g, win, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int conv3x3_im2col_bf16(const bf16* x, int64_t views, int h, int w, int cin, int stride, bf16* cols,
                        cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(x != nullptr && cols != nullptr && x != cols);
  ENCODER_KIT_REQUIRE(views >= 0 && h > 0 && w > 0 && cin > 0 && (stride == 1 || stride == 2));
  const int64_t ho = (h - 1) / stride + 1, wo = (w - 1) / stride + 1;
  const int64_t n = views * ho * wo * 9 * cin;
  if (n == 0) return 0;
  if (vec8(cin, {x, cols}))
    conv3x3_im2col_kernel<8>
        <<<blocks_for(n / 8), kThreads, 0, stream>>>(x, views, h, w, cin, stride, cols);
  else
    conv3x3_im2col_kernel<1>
        <<<blocks_for(n), kThreads, 0, stream>>>(x, views, h, w, cin, stride, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int copy_view_rows_bf16(const bf16* src, int64_t src_view_rows, int64_t src_off, bf16* dst,
                        int64_t dst_view_rows, int64_t dst_off, int64_t rows, int64_t views,
                        int64_t cols, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(src != nullptr && dst != nullptr && src != dst);
  ENCODER_KIT_REQUIRE(rows >= 0 && views >= 0 && cols > 0 && src_view_rows >= 0);
  ENCODER_KIT_REQUIRE(src_off >= 0 && dst_off >= 0 && dst_view_rows >= dst_off + rows);
  const int64_t n = views * rows * cols;
  if (n == 0) return 0;
  if (vec8(cols, {src, dst}))
    copy_view_rows_kernel<8><<<blocks_for(n / 8), kThreads, 0, stream>>>(
        src, src_view_rows, src_off, dst, dst_view_rows, dst_off, rows, views, cols);
  else
    copy_view_rows_kernel<1><<<blocks_for(n), kThreads, 0, stream>>>(
        src, src_view_rows, src_off, dst, dst_view_rows, dst_off, rows, views, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int rotary_rows_bf16(bf16* x, int64_t row_stride, int64_t rows, int period, int heads, int head_dim,
                     const float* cos, const float* sin, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(x != nullptr && cos != nullptr && sin != nullptr);
  ENCODER_KIT_REQUIRE(rows >= 0 && period > 0 && heads > 0 && head_dim > 0 && head_dim % 2 == 0);
  ENCODER_KIT_REQUIRE(row_stride >= static_cast<int64_t>(heads) * head_dim);
  const int64_t n = rows * heads * (head_dim / 2);
  if (n == 0) return 0;
  rotary_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, row_stride, rows, period, heads,
                                                             head_dim, cos, sin);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace dsocr2::cuda
