// Kernels of dsocr2_kernels.hpp. The memory-bound ones are plain grid-stride
// loops (one element or one 8-wide vector per step); the attention is the
// kit's flash-attention structure (plugins/encoder_kit/cuda/attention.cu:
// mma.sync m16n8k16 bf16, online softmax in registers, cp.async tiles) with
// what the kit's kernel lacks: separate q/k/v row strides, grouped KV heads,
// the encoder's prefix mask and the SAM's additive relative-position bias.
// A local copy, not a kit change (the kit is owned elsewhere).
#include "dsocr2_kernels.hpp"

#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace dsocr2::cuda {
namespace {

using encoder_kit::cuda::detail::aligned16;
using namespace encoder_kit::cuda::ptx;  // cp.async, ldmatrix, mma.sync, fast_exp2, quad_*

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

// ---------------------------------------------------------------- attention

constexpr int kBlockN = 64;  // keys per tile
constexpr int kDPad = 64;    // head_dim padded with zero columns in shared memory
constexpr int kAttnWarps = 4;

// The relative-position products are kept in shared memory as bf16, as
// transformers' bf16 model computes them: in fp32 they took twice the space,
// which left two blocks per multiprocessor instead of three and made the
// global-attention layers 20% slower (dsocr2_profile, H200).
using PElem = bf16;
__device__ __forceinline__ float to_float(bf16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ float2 load_pair(const bf16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void store(bf16* p, float v) {
  *p = __float2bfloat16(v);
}

// Columns of a warp's relative-position products: the table's rows (2n - 1,
// padded to a multiple of 8 with zero rows) plus 4, so that the 8 rows a warp
// reads at once fall in different banks.
__host__ __device__ constexpr int rel_stride(int n) {
  return (2 * n - 1 + 7) / 8 * 8 + 4;
}

// The Q tile or, once its rows are in registers, each warp's products
// q . rel_h and q . rel_w (16 rows each), then two K and two V tiles.
__host__ __device__ constexpr size_t attention_front_bytes(bool bias, int hn, int wn) {
  const size_t q = static_cast<size_t>(16 * kAttnWarps) * (kDPad + 8) * sizeof(bf16);
  const size_t p = bias ? static_cast<size_t>(kAttnWarps) * 16 *
                              static_cast<size_t>(rel_stride(hn) + rel_stride(wn)) * sizeof(PElem)
                        : 0;
  return ((q > p ? q : p) + 15) / 16 * 16;
}
size_t attention_smem_bytes(bool bias, int hn, int wn) {
  return attention_front_bytes(bias, hn, wn) +
         static_cast<size_t>(4 * kBlockN) * (kDPad + 8) * sizeof(bf16);
}

// out[r][shift_r + j] = log2(e) * q_r . rel[j] for this warp's 16 query rows r
// and the table's rows j < cols (a multiple of 8), on the tensor cores: A is the
// warp's query fragments, B the table read straight from global memory (it is
// small and shared by every block, so it stays in L1/L2).
template <int kKSteps>
__device__ __forceinline__ void rel_products(const uint32_t (&q_frag)[kKSteps][4],
                                             const bf16* __restrict__ rel, int cols, int hd,
                                             PElem* out, int stride, int g, int t, int shift0,
                                             int shift1) {
  constexpr float kLog2e = 1.4426950408889634f;
  for (int n0 = 0; n0 < cols; n0 += 8) {
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bf16* row = rel + static_cast<int64_t>(n0 + g) * hd;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const int k0 = kk * 16 + 2 * t;
      const uint32_t b0 = k0 < hd ? *reinterpret_cast<const uint32_t*>(row + k0) : 0u;
      const uint32_t b1 = k0 + 8 < hd ? *reinterpret_cast<const uint32_t*>(row + k0 + 8) : 0u;
      mma_bf16(c, q_frag[kk], b0, b1);
    }
    PElem* r0 = out + g * stride + shift0 + n0 + 2 * t;
    PElem* r1 = out + (g + 8) * stride + shift1 + n0 + 2 * t;
    store(r0, c[0] * kLog2e);
    store(r0 + 1, c[1] * kLog2e);
    store(r1, c[2] * kLog2e);
    store(r1 + 1, c[3] * kLog2e);
  }
}

// One block per (sequence, 16 * kAttnWarps query rows, head); see the kit's
// attention.cu for the fragment layouts. What differs: the key range a block
// walks (`key_end`: the prefix mask lets image rows stop at the prefix), the
// per-element mask, and the SAM's decomposed relative-position bias
// (kBias > 0): each warp first computes its rows' products with the two tables
// (get_decomposed_rel_pos's rel_h and rel_w, before the gather) into shared
// memory; a logit then adds P_h[row][qy - ky + hn - 1] + P_w[row][qx - kx + wn - 1].
// kBias == 2 (wn even): keys 2i and 2i + 1 share a grid row, so one P_h read
// and one 4-byte P_w read serve both. P_w[row] is stored one element later when
// qx - kx + wn - 1 is even for even kx, which makes that pair 4-byte aligned.
template <int kBias>
__global__ void __launch_bounds__(kAttnWarps * 32)
    attention_kernel(const AttentionArgs a, int m_blocks, float scale_log2) {
  constexpr int kBlockM = 16 * kAttnWarps;
  constexpr int kThreadsA = 32 * kAttnWarps;
  constexpr int kStride = kDPad + 8;
  constexpr int kChunks = kDPad / 8;
  constexpr int kKSteps = kDPad / 16;
  constexpr int kNTiles = kBlockN / 8;
  constexpr int kDTiles = kDPad / 8;

  const int64_t seq = static_cast<int64_t>(blockIdx.x) / m_blocks;
  const int q0 = static_cast<int>(static_cast<int64_t>(blockIdx.x) - seq * m_blocks) * kBlockM;
  const int head = static_cast<int>(blockIdx.y);
  const int len = a.seq_len;
  if (a.view_count != nullptr && seq >= static_cast<int64_t>(*a.view_count) * a.seqs_per_view)
    return;  // a padded view
  if (q0 >= len) return;
  // Keys any row of this block may see.
  int key_end = len;
  if (a.prefix > 0) key_end = min(len, max(a.prefix, q0 + kBlockM));

  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* s_q = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_k = reinterpret_cast<bf16*>(smem_raw + attention_front_bytes(kBias > 0, a.hn, a.wn));
  bf16* s_v = s_k + 2 * kBlockN * kStride;

  const int hd = a.head_dim;
  const int64_t start = seq * len;
  const bf16* q_base = a.q + start * a.q_stride + static_cast<int64_t>(head) * hd;
  const int kv_head = head / a.group;
  const bf16* k_base = a.k + start * a.kv_stride + static_cast<int64_t>(kv_head) * hd;
  const bf16* v_base = a.v + start * a.kv_stride + static_cast<int64_t>(kv_head) * hd;
  const int valid_chunks = hd / 8;

  auto load_tile = [&](bf16* dst, const bf16* base, int64_t stride, int row0, int rows, int limit) {
    for (int i = threadIdx.x; i < rows * kChunks; i += kThreadsA) {
      const int r = i / kChunks;
      const int c = i - r * kChunks;
      const bool ok = row0 + r < limit && c < valid_chunks;
      const bf16* src = ok ? base + static_cast<int64_t>(row0 + r) * stride + c * 8 : base;
      cp_async16(smem_addr(dst + r * kStride + c * 8), src, ok);
    }
  };

  const int n_tiles = (key_end + kBlockN - 1) / kBlockN;
  load_tile(s_q, q_base, a.q_stride, q0, kBlockM, len);
  load_tile(s_k, k_base, a.kv_stride, 0, kBlockN, key_end);
  cp_async_commit();
  load_tile(s_v, v_base, a.kv_stride, 0, kBlockN, key_end);
  cp_async_commit();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int t = lane & 3;
  const int g = lane >> 2;
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
  const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;

  // This thread's two query rows (within the sequence) and their key limits.
  const int rows_of[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  int limit[2];
  // The bias: this thread's two rows of the warp's products and the offsets
  // qy + hn - 1, qx + wn - 1 of its two query cells (rows past the sequence
  // read as cell 0; their results are dropped).
  const int sh = kBias ? rel_stride(a.hn) : 0, sw = kBias ? rel_stride(a.wn) : 0;
  PElem* p_h = reinterpret_cast<PElem*>(smem_raw) + warp * 16 * (sh + sw);  // over s_q
  PElem* p_w = p_h + 16 * sh;
  const PElem* ph_row[2] = {p_h + g * sh, p_h + (g + 8) * sh};
  const PElem* pw_row[2] = {p_w + g * sw, p_w + (g + 8) * sw};
  int oy[2] = {0, 0}, ox[2] = {0, 0}, shift[2] = {0, 0};
  const float inv_wn = kBias ? 1.0f / static_cast<float>(a.wn) : 0.0f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = rows_of[r];
    limit[r] = a.prefix > 0 ? min(key_end, row < a.prefix ? a.prefix : row + 1) : key_end;
    if (kBias) {
      const int cell = row < len ? row : 0;
      const int qy = cell / a.wn;
      oy[r] = qy + a.hn - 1;
      ox[r] = cell - qy * a.wn + a.wn - 1;
      shift[r] = kBias == 2 && (ox[r] & 1) == 0 ? 1 : 0;
    }
  }

  uint32_t q_frag[kKSteps][4];
  float o[kDTiles][4];
#pragma unroll
  for (int j = 0; j < kDTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  for (int it = 0; it < n_tiles; ++it) {
    const int buf = it & 1;
    const bool more = it + 1 < n_tiles;
    cp_async_wait<1>();
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk)
        ldmatrix_x4(q_frag[kk], smem_addr(s_q + (warp * 16 + a_row) * kStride + kk * 16 + a_col));
      if (kBias) {
        __syncthreads();  // every warp has its Q rows: the products go over s_q
        rel_products(q_frag, a.rel_h, sh - 4, hd, p_h, sh, g, t, 0, 0);
        rel_products(q_frag, a.rel_w, sw - 4, hd, p_w, sw, g, t, shift[0], shift[1]);
        __syncwarp();  // each warp reads only its own rows
      }
    }
    const bf16* k_tile = s_k + buf * kBlockN * kStride;
    const bf16* v_tile = s_v + buf * kBlockN * kStride;

    float s[kNTiles][4];
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int p = 0; p < kNTiles / 2; ++p) {
        uint32_t b[4];
        ldmatrix_x4(b, smem_addr(k_tile + (p * 16 + b_row) * kStride + kk * 16 + b_col));
        mma_bf16(s[2 * p], q_frag[kk], b[0], b[1]);
        mma_bf16(s[2 * p + 1], q_frag[kk], b[2], b[3]);
      }
    }

    if (more)
      load_tile(s_k + (buf ^ 1) * kBlockN * kStride, k_base, a.kv_stride, (it + 1) * kBlockN,
                kBlockN, key_end);
    cp_async_commit();

    // Masked keys get -inf. Key 0 is visible to every row, so after the first
    // tile each row's maximum is finite and no -inf - -inf appears.
    const int key0 = it * kBlockN + 2 * t;
    float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      if constexpr (kBias == 2) {
        // Keys `key` (even) and key + 1: one grid row, cells kx and kx + 1.
        // key / wn without an integer division: (key + 0.5) / wn is at least
        // 0.5 / wn from an integer, far above fp32's error for these sizes.
        const int key = key0 + j * 8;
        const int ky = __float2int_rz((static_cast<float>(key) + 0.5f) * inv_wn);
        const int kx = key - ky * a.wn;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const bool real0 = key < limit[r], real1 = key + 1 < limit[r];
          float b0 = 0.0f, b1 = 0.0f;
          if (real0) {
            const float h = to_float(ph_row[r][oy[r] - ky]);
            const float2 w = load_pair(pw_row[r] + ox[r] - kx - 1 + shift[r]);
            b0 = h + w.y;  // P_w[ox - kx]
            b1 = h + w.x;  // P_w[ox - kx - 1]
          }
          s[j][2 * r] = real0 ? fmaf(s[j][2 * r], scale_log2, b0) : -INFINITY;
          s[j][2 * r + 1] = real1 ? fmaf(s[j][2 * r + 1], scale_log2, b1) : -INFINITY;
          tile_max[r] = fmaxf(tile_max[r], fmaxf(s[j][2 * r], s[j][2 * r + 1]));
        }
      } else {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int key = key0 + j * 8 + c;
          int ky = 0, kx = 0;
          if (kBias) {
            ky = __float2int_rz((static_cast<float>(key) + 0.5f) * inv_wn);
            kx = key - ky * a.wn;
          }
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int e = 2 * r + c;
            const bool real = key < limit[r];
            float v = s[j][e] * scale_log2;
            if (kBias && real)
              v += to_float(ph_row[r][oy[r] - ky]) + to_float(pw_row[r][ox[r] - kx]);
            s[j][e] = real ? v : -INFINITY;
            tile_max[r] = fmaxf(tile_max[r], s[j][e]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = quad_max(tile_max[r]);
      const float alpha = fast_exp2(row_max[r] - tile_max[r]);
      row_max[r] = tile_max[r];
      row_sum[r] *= alpha;
#pragma unroll
      for (int j = 0; j < kDTiles; ++j) {
        o[j][2 * r] *= alpha;
        o[j][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = fast_exp2(s[j][e] - row_max[e >> 1]);
        row_sum[e >> 1] += s[j][e];
      }
    }

    cp_async_wait<1>();
    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t af[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, smem_addr(v_tile + (kk * 16 + a_row) * kStride + dp * 16 + a_col));
        mma_bf16(o[2 * dp], af, b[0], b[1]);
        mma_bf16(o[2 * dp + 1], af, b[2], b[3]);
      }
    }
    if (more)
      load_tile(s_v + (buf ^ 1) * kBlockN * kStride, v_base, a.kv_stride, (it + 1) * kBlockN,
                kBlockN, key_end);
    cp_async_commit();
  }

  if (kBias) __syncthreads();  // no warp reads the products any more
  store_warp_rows<kDTiles, kStride>(
      o, row_sum, s_q + warp * 16 * kStride, lane, q0 + warp * 16, len, valid_chunks,
      a.out + start * a.out_stride + static_cast<int64_t>(head) * hd, a.out_stride);
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

int attention_bf16(const AttentionArgs& a, int64_t num_seqs, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(a.q != nullptr && a.k != nullptr && a.v != nullptr && a.out != nullptr);
  ENCODER_KIT_REQUIRE(aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.out));
  ENCODER_KIT_REQUIRE(a.q_stride % 8 == 0 && a.kv_stride % 8 == 0 && a.out_stride % 8 == 0);
  ENCODER_KIT_REQUIRE(a.head_dim > 0 && a.head_dim % 8 == 0 && a.head_dim <= kDPad);
  ENCODER_KIT_REQUIRE(a.heads > 0 && a.heads <= 65535 && a.group > 0 && a.heads % a.group == 0);
  ENCODER_KIT_REQUIRE(a.seq_len >= 0 && a.prefix >= 0 && a.prefix <= a.seq_len);
  ENCODER_KIT_REQUIRE((a.rel_h == nullptr) == (a.rel_w == nullptr));
  const bool bias = a.rel_h != nullptr;
  ENCODER_KIT_REQUIRE(!bias ||
                      (a.hn > 0 && a.wn > 0 && a.hn <= kMaxRelGrid && a.wn <= kMaxRelGrid &&
                       static_cast<int64_t>(a.hn) * a.wn == a.seq_len));
  ENCODER_KIT_REQUIRE(!bias || (aligned16(a.rel_h) && aligned16(a.rel_w)));
  ENCODER_KIT_REQUIRE(!bias || a.prefix == 0);  // a pair of keys shares its mask
  ENCODER_KIT_REQUIRE(a.seqs_per_view > 0 && num_seqs >= 0);
  if (num_seqs == 0 || a.seq_len == 0) return 0;
  constexpr int kBlockM = 16 * kAttnWarps;
  const size_t smem = attention_smem_bytes(bias, a.hn, a.wn);
  const int mode = !bias ? 0 : (a.wn % 2 == 0 ? 2 : 1);
  const void* kernel = mode == 2   ? reinterpret_cast<const void*>(attention_kernel<2>)
                       : mode == 1 ? reinterpret_cast<const void*>(attention_kernel<1>)
                                   : reinterpret_cast<const void*>(attention_kernel<0>);
  // Above 48 KiB a kernel must opt in, per kernel and device (the attribute
  // belongs to the device current when it is set, and one process may run on
  // several), up to what this launch needs: a GPU with less shared memory per
  // block still runs the smaller grids. Not a stream operation, so legal while
  // a graph is being captured.
  static std::mutex opted_mutex;
  static std::map<std::pair<int, int>, size_t> opted;  // (device, mode) -> bytes
  int device = 0;
  ENCODER_KIT_CUDA_TRY(cudaGetDevice(&device));
  {
    const std::lock_guard<std::mutex> lock(opted_mutex);
    size_t& have = opted[{device, mode}];
    if (smem > have) {
      int limit = 0;
      ENCODER_KIT_CUDA_TRY(
          cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
      ENCODER_KIT_REQUIRE(smem <= static_cast<size_t>(limit));  // hn, wn too large for this GPU
      ENCODER_KIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                static_cast<int>(smem)));
      have = smem;
    }
  }
  const int m_blocks = (a.seq_len + kBlockM - 1) / kBlockM;
  ENCODER_KIT_REQUIRE(num_seqs * m_blocks <= int64_t{0x7fffffff});
  const dim3 grid(static_cast<unsigned>(num_seqs * m_blocks), static_cast<unsigned>(a.heads));
  const float scale_log2 = a.scale * 1.4426950408889634f;
  if (mode == 2)
    attention_kernel<2><<<grid, kAttnWarps * 32, smem, stream>>>(a, m_blocks, scale_log2);
  else if (mode == 1)
    attention_kernel<1><<<grid, kAttnWarps * 32, smem, stream>>>(a, m_blocks, scale_log2);
  else
    attention_kernel<0><<<grid, kAttnWarps * 32, smem, stream>>>(a, m_blocks, scale_log2);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace dsocr2::cuda
