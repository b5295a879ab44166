// The attention family's portable instances (attention.hpp: Warps4, Warps8,
// WarpsRotary; sm80+) and its dispatch, run_attention, which sends long
// sequences on compute capability 9.0 to attention_sm90_tma.cu.
//
// Variable-length attention, flash-attention style (FA2 structure): one block
// per (sequence, block of query rows, head; with fused rotary, a few heads
// walked in turn), heads fastest; each warp owns 16 query rows and
// walks the sequence's keys in tiles of 64 with an online softmax, so scores
// never leave registers. Q·K^T and P·V run on mma.sync m16n8k16 bf16 with fp32
// accumulators; tiles arrive through cp.async, double-buffered, K and V in
// separate groups so loads overlap the arithmetic even for one-tile windows.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane/4, t = lane%4):
//   A 16x16: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8:  b0 (k 2t..2t+1, n g)  b1 (k 2t+8.., n g)
//   C 16x8:  c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)
// The C layout of two neighbouring n8 tiles is the A layout of one k16 step,
// which is how P goes from the softmax straight into P·V without shared memory.
//
// With kRotary the kernel applies rotary_bf16's rotation to Q and K in shared
// memory as they arrive (same formula, same fp32 arithmetic rounded to bf16),
// so qkv itself stays unrotated and the separate rotary pass disappears. It is
// built for sequences of up to 64 tokens (Qwen's windows): one block holds the
// whole sequence, and each token is rotated once.
//
// With an Extras policy (AttentionParams::extras; DeepSeek-OCR-2's SAM and
// encoder) the 4-warp form reads separate q/k/v rows at their own strides,
// maps query heads to grouped KV heads, walks only the keys a prefix mask
// lets a block see, and adds the SAM's decomposed relative-position bias.
// Those are compile-time features: the other policies' instances compile to
// the code they had before the features existed.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "launch.cuh"
#include "rotary.cuh"
#include "smem_opt_in.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace encoder_kit::cuda {
namespace {

using namespace ptx;

constexpr int kBlockN = 64;  // keys per tile

template <int kDPad, int kWarps>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(16 * kWarps + 4 * kBlockN) * (kDPad + 8) * sizeof(bf16);
}

// kDPad: head_dim rounded up to a multiple of 16 (zero columns in shared memory).
// Shared rows are kDPad + 8 elements long: the 16-byte skew makes the eight row
// addresses of every ldmatrix phase fall in distinct banks.
// Up to head_dim 80 the kernel fits in 128 registers a thread; saying so keeps
// 16 warps resident per multiprocessor (at 129+ the allocator drops a block).
// The Extras forms say nothing (1): their bias products limit them to two or
// three blocks a multiprocessor through shared memory anyway.
template <int kDPad, int kWarps, class F>
constexpr int min_blocks() {
  return F::kExtras ? 1 : kDPad <= 80 ? 16 / kWarps : 1;
}

// The rotary table of the fused form (kRotary): cos/sin rows of every token,
// rotary_bf16's layout, 16-byte aligned with a stride that keeps them so.
struct RotaryTable {
  const float* cos;
  const float* sin;
  int64_t stride;  // floats from one token's row to the next
};

// The Extras forms' inputs (AttentionExtras, with the KV group and the
// sequence length folded in).
struct ExtraArgs {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  int64_t q_stride, kv_stride, out_stride;
  int group;    // query heads per KV head
  int seq_len;  // every sequence's length
  int prefix;
  const bf16* rel_h;
  const bf16* rel_w;
  int hn, wn;
  const int32_t* view_count;
  int seqs_per_view;
};

// Feature policies: what an instance of the kernel compiles in. kBias: 0 none,
// 1 the decomposed relative-position bias key by key, 2 the same with keys
// paired (wn even: keys 2i and 2i + 1 share a grid row).
struct Plain {
  static constexpr bool kRotary = false, kExtras = false;
  static constexpr int kBias = 0;
  using Side = RotaryTable;  // unused
};
struct Rotary {
  static constexpr bool kRotary = true, kExtras = false;
  static constexpr int kBias = 0;
  using Side = RotaryTable;
};
template <int kBiasMode>
struct Extras {
  static constexpr bool kRotary = false, kExtras = true;
  static constexpr int kBias = kBiasMode;
  using Side = ExtraArgs;
};

// The bias products are kept in shared memory as bf16, as transformers' bf16
// model computes them: in fp32 they took twice the space, which left two
// blocks per multiprocessor instead of three and made the SAM's global layers
// 20% slower (ncu_profile.py --model dsocr2, H200).
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

// The Extras forms' shared memory in front of the K and V tiles: the Q tile
// or, once its rows are in registers, each warp's products q . rel_h and
// q . rel_w (16 rows each).
template <int kDPad, int kWarps>
__host__ __device__ constexpr size_t extras_front_bytes(bool bias, int hn, int wn) {
  const size_t q = static_cast<size_t>(16 * kWarps) * (kDPad + 8) * sizeof(bf16);
  const size_t p = bias ? static_cast<size_t>(kWarps) * 16 *
                              static_cast<size_t>(rel_stride(hn) + rel_stride(wn)) * sizeof(PElem)
                        : 0;
  return ((q > p ? q : p) + 15) / 16 * 16;
}
template <int kDPad, int kWarps>
constexpr size_t extras_smem_bytes(bool bias, int hn, int wn) {
  return extras_front_bytes<kDPad, kWarps>(bias, hn, wn) +
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

// Four rotary pairs (lo[k], lo[k + half]) of a shared row, in place, as
// rotary_bf16 computes them (rotary.cuh): fp32, rounded to bf16.
__device__ __forceinline__ void rotate4(bf16* lo, int half, float4 cs, float4 sn) {
  bf16* hi = lo + half;
  const uint2 lo_raw = *reinterpret_cast<const uint2*>(lo);
  const uint2 hi_raw = *reinterpret_cast<const uint2*>(hi);
  const bf16* x1 = reinterpret_cast<const bf16*>(&lo_raw);
  const bf16* x2 = reinterpret_cast<const bf16*>(&hi_raw);
  const float c4[4] = {cs.x, cs.y, cs.z, cs.w}, s4[4] = {sn.x, sn.y, sn.z, sn.w};
  uint2 o1_raw, o2_raw;
  bf16* o1 = reinterpret_cast<bf16*>(&o1_raw);
  bf16* o2 = reinterpret_cast<bf16*>(&o2_raw);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float r1, r2;
    detail::rotate_pair(__bfloat162float(x1[k]), __bfloat162float(x2[k]), c4[k], s4[k], r1, r2);
    o1[k] = __float2bfloat16(r1);
    o2[k] = __float2bfloat16(r2);
  }
  *reinterpret_cast<uint2*>(lo) = o1_raw;
  *reinterpret_cast<uint2*>(hi) = o2_raw;
}

template <int kDPad, int kWarps, class F>
__global__ void __launch_bounds__(kWarps * 32, (min_blocks<kDPad, kWarps, F>()))
    varlen_attention_kernel(const bf16* __restrict__ qkv, const int32_t* __restrict__ cu_seqlens,
                            int max_seqs, int m_blocks, int num_heads, int head_dim,
                            float scale_log2, typename F::Side side, int heads_per_block,
                            bf16* __restrict__ out) {
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  constexpr bool kRotary = F::kRotary;
  constexpr bool kExtras = F::kExtras;
  constexpr int kBias = F::kBias;
  constexpr int kBlockM = 16 * kWarps;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kStride = kDPad + 8;
  constexpr int kChunks = kDPad / 8;  // 16-byte chunks per shared row
  constexpr int kKSteps = kDPad / 16;
  constexpr int kNTiles = kBlockN / 8;
  constexpr int kDTiles = kDPad / 8;
  static_assert(!kExtras || (!kRotary && kWarps == 4), "extras: the 4-warp plain form");

  // The grid covers (query block, group of heads_per_block heads) pairs,
  // heads fastest: x the group, y and z the block. The blocks that run
  // together read whole qkv rows of the same tokens (all heads' 160-byte
  // pieces of a 7680-byte row at head_dim 80) and share the rotary rows in L2,
  // instead of one head's pieces of a thousand windows' rows. A block walks
  // its group's heads one after the other; with kRotary it loads the
  // sequence's cos/sin rows once for all of them (from L2 they cost two thirds
  // of a head's q, k and v in traffic into the multiprocessor). The coordinates
  // come from special registers, which keep no register live (a computed
  // flat index cost a spill at head_dim 64).
  // y + z * 65535 can pass INT_MAX in the last z slice: compared in 64 bits.
  const int64_t block64 = blockIdx.y + int64_t{blockIdx.z} * gridDim.y;
  if (block64 >= int64_t{m_blocks} * max_seqs) return;  // z's last slice runs past the blocks
  const int block = static_cast<int>(block64);
  const int head0 = static_cast<int>(blockIdx.x) * heads_per_block;
  const int seq = block / m_blocks;
  const int q0 = (block - seq * m_blocks) * kBlockM;
  if constexpr (kExtras) {
    if (side.view_count != nullptr &&
        static_cast<int64_t>(seq) >= static_cast<int64_t>(*side.view_count) * side.seqs_per_view)
      return;  // a padded view
  }
  // Extras: sequences of seq_len rows one after another (start unused).
  const int start = [&] {
    if constexpr (kExtras)
      return 0;
    else
      return cu_seqlens[seq];
  }();
  // kRotary holds a whole sequence in one tile: a longer one than the entry's
  // max_seqlen <= 64 promised is cut to its first 64 tokens (rows past them
  // stay unwritten, as past max_seqlen elsewhere), never run past the tile.
  const int len = [&] {
    if constexpr (kExtras)
      return side.seq_len;
    else
      return kRotary ? min(cu_seqlens[seq + 1] - start, kBlockN) : cu_seqlens[seq + 1] - start;
  }();
  if (q0 >= len) return;  // padded sequence or past its end: the cheap exit
  // Keys any row of this block may see: with a prefix mask, the rows before
  // the prefix stop there.
  int key_end = len;
  if constexpr (kExtras) {
    if (side.prefix > 0) key_end = min(len, max(side.prefix, q0 + kBlockM));
  }

  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* s_q = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_k = s_q + kBlockM * kStride;  // [2][kBlockN][kStride]
  if constexpr (kExtras)                // behind the bias products, which outgrow the Q tile
    s_k = reinterpret_cast<bf16*>(smem_raw +
                                  extras_front_bytes<kDPad, kWarps>(kBias > 0, side.hn, side.wn));
  bf16* s_v = s_k + 2 * kBlockN * kStride;

  // Without rotary a block has one head (the entry's rule): a constant here,
  // so the loop leaves that form's code as it was.
  const int block_heads = kRotary ? heads_per_block : 1;
  for (int hi = 0; hi < block_heads; ++hi) {
    const int head = head0 + hi;
    // The previous head's warps are done with every buffer (their output
    // staging in s_q included) before this head's copies overwrite them.
    if (hi > 0) __syncthreads();
    // Rows of Q and of K/V, and where this head's columns start in each.
    int64_t q_stride, kv_stride;
    const bf16 *q_base, *k_base, *v_base;
    if constexpr (kExtras) {
      const int64_t first = static_cast<int64_t>(seq) * len;
      const int kv_head = head / side.group;
      q_stride = side.q_stride;
      kv_stride = side.kv_stride;
      q_base = side.q + first * q_stride + static_cast<int64_t>(head) * head_dim;
      k_base = side.k + first * kv_stride + static_cast<int64_t>(kv_head) * head_dim;
      v_base = side.v + first * kv_stride + static_cast<int64_t>(kv_head) * head_dim;
    } else {
      const int64_t row_stride = int64_t{3} * num_heads * head_dim;
      q_stride = kv_stride = row_stride;
      q_base =
          qkv + static_cast<int64_t>(start) * row_stride + static_cast<int64_t>(head) * head_dim;
      k_base = q_base + static_cast<int64_t>(num_heads) * head_dim;
      v_base = k_base + static_cast<int64_t>(num_heads) * head_dim;
    }
    const int valid_chunks = head_dim / 8;

    // Rows row0 .. row0 + rows - 1 of a tile; those at or past limit and the
    // pad columns are zero-filled.
    auto load_tile = [&](bf16* dst, const bf16* base, int64_t row_stride, int row0, int rows,
                         int limit) {
      for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
        const int r = i / kChunks;
        const int c = i - r * kChunks;
        const bool ok = row0 + r < limit && c < valid_chunks;
        const bf16* src = ok ? base + static_cast<int64_t>(row0 + r) * row_stride + c * 8 : base;
        cp_async16(smem_addr(dst + r * kStride + c * 8), src, ok);
      }
    };

    const int half = head_dim / 2;
    // kRotary: every sequence fits one key tile and one query block (the entry
    // requires max_seqlen <= 64), so Q and K hold the same tokens and one set of
    // cos/sin rows serves both. They travel by cp.async with Q and K, into the
    // second K and V buffers, which a single tile never uses (each holds 64 rows
    // of up to head_dim/2 + 4 floats): the rotation costs shared-memory work
    // only, not a second round trip to global memory after the tiles land.
    static_assert(!kRotary || kBlockM == kBlockN, "rotary: one query block = one key tile");
    float* s_cos = reinterpret_cast<float*>(s_k + kBlockN * kStride);
    float* s_sin = reinterpret_cast<float*>(s_v + kBlockN * kStride);
    auto load_table = [&]() {
      if constexpr (kRotary) {
        const int quads = half / 4;  // 16-byte chunks of a table row
        for (int i = threadIdx.x; i < len * quads; i += kThreads) {
          const int r = i / quads;
          const int c = (i - r * quads) * 4;
          const int64_t at = (start + r) * side.stride + c;
          cp_async16(smem_addr(s_cos + r * half + c), side.cos + at, true);
          cp_async16(smem_addr(s_sin + r * half + c), side.sin + at, true);
        }
      }
    };
    auto rotate_window = [&]() {
      const int quads = half / 4;
      for (int i = threadIdx.x; i < len * quads; i += kThreads) {
        const int r = i / quads;
        const int c = (i - r * quads) * 4;
        const float4 cs = *reinterpret_cast<const float4*>(s_cos + r * half + c);
        const float4 sn = *reinterpret_cast<const float4*>(s_sin + r * half + c);
        rotate4(s_q + r * kStride + c, half, cs, sn);
        rotate4(s_k + r * kStride + c, half, cs, sn);
      }
    };

    const int n_tiles = (key_end + kBlockN - 1) / kBlockN;
    // K and V travel in separate cp.async groups, so Q·K^T and the softmax of a
    // tile run while its V (and the next K) are still arriving. Groups in
    // flight at the top of iteration `it`: [K_it], [V_it], oldest first.
    load_tile(s_q, q_base, q_stride, q0, kBlockM, len);
    load_tile(s_k, k_base, kv_stride, 0, kBlockN, key_end);
    if (kRotary && hi == 0) load_table();
    cp_async_commit();
    load_tile(s_v, v_base, kv_stride, 0, kBlockN, key_end);
    cp_async_commit();

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int t = lane & 3;
    const int g = lane >> 2;
    // ldmatrix x4 row/column offsets of this lane (see the fragment notes above).
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
    const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;

    // Extras: this thread's two query rows' key limits (the prefix mask) and,
    // with the bias, its two rows of the warp's products and the offsets
    // qy + hn - 1, qx + wn - 1 of its two query cells (rows past the sequence
    // read as cell 0; their results are dropped). kBias == 2 stores P_w[row]
    // one element later when qx - kx + wn - 1 is even for even kx, which makes
    // the pair of keys 2i, 2i + 1 one 4-byte aligned read.
    int limit[2] = {key_end, key_end};
    int oy[2] = {0, 0}, ox[2] = {0, 0}, shift[2] = {0, 0};
    int sh = 0, sw = 0;
    PElem* p_h = nullptr;
    PElem* p_w = nullptr;
    float inv_wn = 0.0f;
    if constexpr (kExtras) {
      const int rows_of[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
      if constexpr (kBias > 0) {
        sh = rel_stride(side.hn);
        sw = rel_stride(side.wn);
        p_h = reinterpret_cast<PElem*>(smem_raw) + warp * 16 * (sh + sw);  // over s_q
        p_w = p_h + 16 * sh;
        inv_wn = 1.0f / static_cast<float>(side.wn);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = rows_of[r];
        limit[r] =
            side.prefix > 0 ? min(key_end, row < side.prefix ? side.prefix : row + 1) : key_end;
        if constexpr (kBias > 0) {
          const int cell = row < len ? row : 0;
          const int qy = cell / side.wn;
          oy[r] = qy + side.hn - 1;
          ox[r] = cell - qy * side.wn + side.wn - 1;
          shift[r] = kBias == 2 && (ox[r] & 1) == 0 ? 1 : 0;
        }
      }
    }
    const PElem* ph_row[2] = {p_h + g * sh, p_h + (g + 8) * sh};
    const PElem* pw_row[2] = {p_w + g * sw, p_w + (g + 8) * sw};

    uint32_t q_frag[kKSteps][4];
    float o[kDTiles][4];
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g+8, log2 domain
    float row_sum[2] = {0.0f, 0.0f};            // this thread's partial sums

    for (int it = 0; it < n_tiles; ++it) {
      const int buf = it & 1;
      const bool more = it + 1 < n_tiles;
      cp_async_wait<1>();  // K_it (and Q) landed; V_it may still be in flight
      __syncthreads();
      const bf16* k_tile = s_k + buf * kBlockN * kStride;
      const bf16* v_tile = s_v + buf * kBlockN * kStride;
      if constexpr (kRotary) {
        rotate_window();
        __syncthreads();
      }
      if (it == 0) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk)
          ldmatrix_x4(q_frag[kk], smem_addr(s_q + (warp * 16 + a_row) * kStride + kk * 16 + a_col));
        if constexpr (kBias > 0) {
          __syncthreads();  // every warp has its Q rows: the products go over s_q
          rel_products(q_frag, side.rel_h, sh - 4, head_dim, p_h, sh, g, t, 0, 0);
          rel_products(q_frag, side.rel_w, sw - 4, head_dim, p_w, sw, g, t, shift[0], shift[1]);
          __syncwarp();  // each warp reads only its own rows
        }
      }

      // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
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

      // The other K buffer was last read by the previous tile's Q·K^T, which
      // every warp finished before the barrier above.
      if (more)
        load_tile(s_k + (buf ^ 1) * kBlockN * kStride, k_base, kv_stride, (it + 1) * kBlockN,
                  kBlockN, key_end);
      cp_async_commit();  // possibly empty: keeps the group count uniform

      // Online softmax in the log2 domain. Every tile holds at least one real
      // key (with a prefix mask: key 0 is visible to every row), so the new
      // maximum is finite and no -inf - -inf appears.
      const int key0 = it * kBlockN + 2 * t;
      float tile_max[2] = {row_max[0], row_max[1]};
      if constexpr (kExtras) {
        // Per-row key limits, and the bias added to the scaled logit.
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          if constexpr (kBias == 2) {
            // Keys `key` (even) and key + 1: one grid row, cells kx and kx + 1.
            // key / wn without an integer division: (key + 0.5) / wn is at least
            // 0.5 / wn from an integer, far above fp32's error for these sizes.
            const int key = key0 + j * 8;
            const int ky = __float2int_rz((static_cast<float>(key) + 0.5f) * inv_wn);
            const int kx = key - ky * side.wn;
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
                kx = key - ky * side.wn;
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
      } else {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool real = key0 + j * 8 + (e & 1) < len;
            s[j][e] = real ? s[j][e] * scale_log2 : -INFINITY;
            tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[j][e]);
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

      cp_async_wait<1>();  // V_it landed; K_{it+1} may still be in flight
      __syncthreads();

      // O += P V, P re-packed from the accumulators as bf16 A fragments.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                               pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                               pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < kDTiles / 2; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, smem_addr(v_tile + (kk * 16 + a_row) * kStride + dp * 16 + a_col));
          mma_bf16(o[2 * dp], a, b[0], b[1]);
          mma_bf16(o[2 * dp + 1], a, b[2], b[3]);
        }
      }
      // The other V buffer was last read by the previous tile's P·V, finished
      // by every warp before the barrier above.
      if (more)
        load_tile(s_v + (buf ^ 1) * kBlockN * kStride, v_base, kv_stride, (it + 1) * kBlockN,
                  kBlockN, key_end);
      cp_async_commit();
    }

    // Normalise and stage the warp's 16 rows in its own rows of s_q (only this
    // warp ever read them), then write whole 16-byte chunks of real rows. The
    // bias products lie over other warps' rows of s_q: all done with first.
    if constexpr (kBias > 0) __syncthreads();
    int64_t out_stride;
    bf16* out_rows;
    if constexpr (kExtras) {
      out_stride = side.out_stride;
      out_rows = out + static_cast<int64_t>(seq) * len * out_stride +
                 static_cast<int64_t>(head) * head_dim;
    } else {
      out_stride = static_cast<int64_t>(num_heads) * head_dim;
      out_rows =
          out + static_cast<int64_t>(start) * out_stride + static_cast<int64_t>(head) * head_dim;
    }
    store_warp_rows<kDTiles, kStride>(o, row_sum, s_q + warp * 16 * kStride, lane, q0 + warp * 16,
                                      len, valid_chunks, out_rows, out_stride);
  }
}

}  // namespace

namespace detail {

int rotary_heads_per_block(int64_t pairs, int num_heads, int multiprocessors) {
  constexpr int kBlocksPerSm = 16;
  int g = 1;
  while (multiprocessors > 0 && g < 16 && num_heads % (2 * g) == 0 &&
         pairs / (2 * g) >= int64_t{kBlocksPerSm} * multiprocessors)
    g *= 2;
  return g;
}

}  // namespace detail

namespace {

template <int kDPad, int kWarps, class F>
int launch(const AttentionParams& p) {
  constexpr bool kRotary = F::kRotary;
  constexpr int kBlockM = 16 * kWarps;
  // The Extras forms opt in once for the largest bias grid (kMaxRelGrid) and
  // launch with what this grid needs.
  constexpr size_t kSmem =
      F::kExtras ? extras_smem_bytes<kDPad, kWarps>(F::kBias > 0, kMaxRelGrid, kMaxRelGrid)
                 : smem_bytes<kDPad, kWarps>();
  auto* kernel = varlen_attention_kernel<kDPad, kWarps, F>;
  const int opt_in = detail::opt_in_dynamic_smem(kernel, kSmem);
  if (opt_in != 0) return opt_in;
  const int m_blocks = (p.max_seqlen + kBlockM - 1) / kBlockM;
  const int64_t blocks = static_cast<int64_t>(p.max_seqs) * m_blocks;
  ENCODER_KIT_REQUIRE(blocks <= int64_t{0x7fffffff});
  int heads_per_block = p.rotary_heads_per_block;
  if (heads_per_block == 0)
    heads_per_block = kRotary ? detail::rotary_heads_per_block(blocks * p.num_heads, p.num_heads,
                                                               detail::current_multiprocessors())
                              : 1;
  const unsigned groups = static_cast<unsigned>(p.num_heads / heads_per_block);
  // Heads fastest: (group, block over y and z). y and z hold up to 65535
  // each: blocks past that go on to z slices.
  constexpr int64_t kYMax = 65535;
  const dim3 grid(groups, static_cast<unsigned>(std::min(blocks, kYMax)),
                  static_cast<unsigned>((blocks + kYMax - 1) / kYMax));
  typename F::Side side{};
  size_t smem = kSmem;
  if constexpr (F::kExtras) {
    const AttentionExtras& x = *p.extras;
    side = ExtraArgs{x.q,
                     x.k,
                     x.v,
                     x.q_stride,
                     x.kv_stride,
                     x.out_stride,
                     p.num_heads / x.kv_heads,
                     p.max_seqlen,
                     x.prefix,
                     x.rel_h,
                     x.rel_w,
                     x.hn,
                     x.wn,
                     x.view_count,
                     x.seqs_per_view};
    smem = extras_smem_bytes<kDPad, kWarps>(F::kBias > 0, x.hn, x.wn);
  } else {
    side = kRotary ? RotaryTable{p.rotary_cos, p.rotary_sin, p.rotary_stride}
                   : RotaryTable{nullptr, nullptr, 0};
  }
  return detail::launch_kernel(kernel, grid, dim3(kWarps * 32), smem, p.stream, p.qkv, p.cu_seqlens,
                               p.max_seqs, m_blocks, p.num_heads, p.head_dim,
                               p.scale * 1.4426950408889634f, side, heads_per_block, p.out);
}

// The warps forms' instances: head_dim padded to 64, 80, 96 or 128.
template <int kWarps, class F>
int run_warps(const AttentionParams& p) {
  auto go = [&](auto dpad) { return launch<decltype(dpad)::value, kWarps, F>(p); };
  if (p.head_dim <= 64) return go(std::integral_constant<int, 64>{});
  if (p.head_dim <= 80) return go(std::integral_constant<int, 80>{});
  if (p.head_dim <= 96) return go(std::integral_constant<int, 96>{});
  return go(std::integral_constant<int, 128>{});
}

// The Extras forms: head_dim up to 64 (DeepSeek-OCR-2's 64; the instances
// cost compile time), the bias key by key or paired.
int run_extras(const AttentionParams& p) {
  const AttentionExtras& x = *p.extras;
  if (x.rel_h == nullptr) return launch<64, 4, Extras<0>>(p);
  if (x.wn % 2 == 0) return launch<64, 4, Extras<2>>(p);
  return launch<64, 4, Extras<1>>(p);
}

// The extras' rules (AttentionExtras).
int check_extras(const AttentionParams& p, AttentionKernel kernel) {
  const AttentionExtras& x = *p.extras;
  ENCODER_KIT_REQUIRE(kernel == AttentionKernel::Warps4 || kernel == AttentionKernel::Hopper);
  ENCODER_KIT_REQUIRE(p.qkv == nullptr && p.cu_seqlens == nullptr && p.rotary_cos == nullptr);
  ENCODER_KIT_REQUIRE(p.rotary_heads_per_block <= 1);
  ENCODER_KIT_REQUIRE(x.q != nullptr && x.k != nullptr && x.v != nullptr && p.out != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(x.q) && detail::aligned16(x.k) && detail::aligned16(x.v) &&
                      detail::aligned16(p.out));
  ENCODER_KIT_REQUIRE(x.q_stride % 8 == 0 && x.kv_stride % 8 == 0 && x.out_stride % 8 == 0);
  ENCODER_KIT_REQUIRE(p.max_seqs >= 0 && p.max_seqlen >= 0 && p.num_heads > 0 &&
                      p.num_heads <= 65535);
  ENCODER_KIT_REQUIRE(p.head_dim > 0 && p.head_dim % 8 == 0 && p.head_dim <= 64);
  ENCODER_KIT_REQUIRE(x.kv_heads > 0 && p.num_heads % x.kv_heads == 0);
  ENCODER_KIT_REQUIRE(x.prefix >= 0 && x.prefix <= p.max_seqlen);
  ENCODER_KIT_REQUIRE((x.rel_h == nullptr) == (x.rel_w == nullptr));
  if (x.rel_h != nullptr) {
    ENCODER_KIT_REQUIRE(x.hn > 0 && x.wn > 0 && x.hn <= kMaxRelGrid && x.wn <= kMaxRelGrid &&
                        static_cast<int64_t>(x.hn) * x.wn == p.max_seqlen);
    ENCODER_KIT_REQUIRE(detail::aligned16(x.rel_h) && detail::aligned16(x.rel_w));
    ENCODER_KIT_REQUIRE(x.prefix == 0);  // a pair of keys shares its mask
  }
  ENCODER_KIT_REQUIRE(x.seqs_per_view > 0);
  if (kernel == AttentionKernel::Hopper)
    ENCODER_KIT_REQUIRE(hopper_takes_extras(p) && detail::sm90_attention_supported());
  return 0;
}

// The rules every instance's arguments follow, and each instance's own.
int check(const AttentionParams& p, AttentionKernel kernel) {
  if (p.extras != nullptr) return check_extras(p, kernel);
  ENCODER_KIT_REQUIRE(p.qkv != nullptr && p.cu_seqlens != nullptr && p.out != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(p.qkv) && detail::aligned16(p.out));
  ENCODER_KIT_REQUIRE(p.max_seqs >= 0 && p.max_seqlen >= 0 && p.num_heads > 0 &&
                      p.num_heads <= 65535);
  ENCODER_KIT_REQUIRE(p.head_dim > 0 && p.head_dim % 8 == 0 && p.head_dim <= 128);
  // 0: the launch picks; else a divisor of num_heads, and more than one only
  // for the rotary form.
  ENCODER_KIT_REQUIRE(p.rotary_heads_per_block >= 0 && p.rotary_heads_per_block <= p.num_heads);
  ENCODER_KIT_REQUIRE(p.rotary_heads_per_block == 0 || p.num_heads % p.rotary_heads_per_block == 0);
  const bool rotary = kernel == AttentionKernel::WarpsRotary;
  ENCODER_KIT_REQUIRE(rotary == (p.rotary_cos != nullptr));
  ENCODER_KIT_REQUIRE(rotary || p.rotary_heads_per_block <= 1);
  if (rotary) {
    ENCODER_KIT_REQUIRE(p.max_seqlen <= 64);  // one tile: the rotation is done once
    ENCODER_KIT_REQUIRE(p.rotary_cos != nullptr && p.rotary_sin != nullptr);
    ENCODER_KIT_REQUIRE(detail::aligned16(p.rotary_cos) && detail::aligned16(p.rotary_sin));
    ENCODER_KIT_REQUIRE(p.rotary_stride >= p.head_dim / 2 && p.rotary_stride % 4 == 0);
  }
  if (kernel == AttentionKernel::Hopper) ENCODER_KIT_REQUIRE(detail::sm90_attention_supported());
  return 0;
}

}  // namespace

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::Hopper: return "Hopper: TMA, wgmma, 2 warpgroups";
    case AttentionKernel::Warps4: return "mma.sync, 4 warps";
    case AttentionKernel::Warps8: return "mma.sync, 8 warps";
    case AttentionKernel::WarpsRotary: return "mma.sync, 4 warps, rotary fused";
  }
  return "?";
}

bool hopper_takes_extras(const AttentionParams& p) {
  if (p.extras == nullptr) return false;
  const AttentionExtras& x = *p.extras;
  const bool grid_ok =
      x.rel_h == nullptr || (x.hn <= kMaxHopperRelGrid && x.wn <= kMaxHopperRelGrid);
  return p.head_dim <= 64 && x.prefix == 0 && grid_ok &&
         static_cast<int64_t>(p.max_seqs) * p.max_seqlen <= int64_t{0x7fffffff};
}

AttentionKernel pick_attention_kernel(const AttentionParams& p) {
  if (p.extras != nullptr)
    return p.max_seqlen > 64 && hopper_takes_extras(p) && detail::sm90_attention_supported()
               ? AttentionKernel::Hopper
               : AttentionKernel::Warps4;
  if (p.rotary_cos != nullptr) return AttentionKernel::WarpsRotary;
  if (p.max_seqlen <= 64) return AttentionKernel::Warps4;
  return detail::sm90_attention_supported() ? AttentionKernel::Hopper : AttentionKernel::Warps8;
}

int run_attention(const AttentionParams& p, AttentionKernel kernel) {
  if (const int err = check(p, kernel)) return err;
  if (p.max_seqs == 0 || p.max_seqlen == 0) return 0;
  switch (kernel) {
    case AttentionKernel::Hopper: return detail::run_attention_hopper(p);
    case AttentionKernel::Warps4: return p.extras ? run_extras(p) : run_warps<4, Plain>(p);
    case AttentionKernel::Warps8: return run_warps<8, Plain>(p);
    case AttentionKernel::WarpsRotary: return run_warps<4, Rotary>(p);
  }
  return detail::record_failure(static_cast<int>(cudaErrorInvalidValue),
                                "kernel (not an AttentionKernel)", __FILE__, __LINE__);
}

int run_attention(const AttentionParams& p) {
  return run_attention(p, pick_attention_kernel(p));
}

int varlen_attention_bf16(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs, int max_seqlen,
                          int num_heads, int head_dim, float scale, bf16* out,
                          cudaStream_t stream) {
  AttentionParams p;
  p.qkv = qkv;
  p.cu_seqlens = cu_seqlens;
  p.max_seqs = max_seqs;
  p.max_seqlen = max_seqlen;
  p.num_heads = num_heads;
  p.head_dim = head_dim;
  p.scale = scale;
  p.out = out;
  p.stream = stream;
  return run_attention(p);
}

int varlen_attention_rotary_bf16(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                 int max_seqlen, int num_heads, int head_dim, float scale,
                                 const float* cos, const float* sin, int64_t cs_stride, bf16* out,
                                 cudaStream_t stream) {
  AttentionParams p;
  p.qkv = qkv;
  p.cu_seqlens = cu_seqlens;
  p.max_seqs = max_seqs;
  p.max_seqlen = max_seqlen;
  p.num_heads = num_heads;
  p.head_dim = head_dim;
  p.scale = scale;
  p.rotary_cos = cos;
  p.rotary_sin = sin;
  p.rotary_stride = cs_stride;
  p.out = out;
  p.stream = stream;
  // Always the rotary form: a missing table is an argument error, not a
  // silent plain attention over unrotated q and k.
  return run_attention(p, AttentionKernel::WarpsRotary);
}

}  // namespace encoder_kit::cuda
