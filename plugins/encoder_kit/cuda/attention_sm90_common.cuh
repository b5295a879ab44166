// The building blocks of the Hopper attention kernel (attention_sm90_tma.cu),
// some shared with the Hopper matrix product (gemm_sm90.cu): the wgmma
// bracket, the register fences, the shared-memory descriptors, the Q K^T
// step, the online softmax and O's rescaling. sm_90a only (wgmma); included
// by .cu files of the encgraph_encoder_kit_cuda_sm90 object library.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "wgmma.cuh"

#include <cuda_bf16.h>

#include <cstdint>

// wgmma exists only in the arch-specific sm_90a target; everything else gets
// kernels that trap (never launched: sm90_attention_supported() checks first).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ENCODER_KIT_HAS_WGMMA 1
#else
#define ENCODER_KIT_HAS_WGMMA 0
#endif

namespace encoder_kit::cuda::sm90 {

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads or writes of accumulators across the
// asynchronous wgmma that owns them.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}
// Accumulators a wgmma starts from zero: registers a wgmma reads or
// accumulates into must be final before the wgmma.fence that precedes it
// (PTX: no register writes between the fence and the wgmma), so they are
// zeroed and fenced first.
template <int N>
__device__ __forceinline__ void zeroed_for_wgmma(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) r[i] = 0.0f;
  fence_registers(r);
}
// cp.async writes go through the generic proxy, wgmma reads through the async
// one: a fence between them, after the writes are known to have landed.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Shared-memory matrix descriptor, no swizzle: start address, leading and
// stride byte offsets, each in 16-byte units.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>((lbo & 0x3FFFFu) >> 4) << 16) |
         (static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32);
}

// The same for a K-major tile written by TMA with 128-byte swizzling: rows of
// 64 bf16 (128 bytes), 8-row atoms 1024 bytes apart (layout type 1 in bits
// 62-63); the tile starts 1024-byte aligned, and `addr` may step 32 bytes a
// k16 slice within the row.
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t addr) {
  return smem_desc(addr, 16, 1024) | (uint64_t{1} << 62);
}

// One k16 step of S = Q K^T with Q in shared memory.
template <int kBlockN>
__device__ __forceinline__ void qk_step(float (&s)[kBlockN / 2], uint64_t da, uint64_t db,
                                        int accumulate) {
  if constexpr (kBlockN == 64)
    wgmma_m64n64k16_ss(s, da, db, accumulate);
  else
    wgmma_m64n128k16_ss(s, da, db, accumulate);
}
// Online softmax of one S tile (64 rows of a warpgroup x kBlockN keys from
// key0) in the log2 domain: scales and masks s, moves the running max, rounds
// the probabilities into P's A fragments, rescales the row sums, and returns
// whether O must be rescaled too (by alpha). t = lane % 4. Keys at len and
// past it are masked, and so are keys below key_lo: a sequence's last tile may
// be its last kBlockN rows (attention_sm90_tma.cu), which overlap the tile
// before. Every tile holds at least one real key, so the new maximum is
// finite.
//
// The max moves lazily: only when some row of the warp sees a score more than
// `slack` (log2 units) above its running max. Below that, probabilities
// are taken against the old max and may reach 2^slack, which fp32 sums, bf16
// P and fp32 O hold exactly as well (relative precision does not depend on
// magnitude); the final division by the sum taken against the same max
// cancels the choice. A warp that keeps its max skips O's rescaling, most
// tiles after the first few. kLazy = false moves it on every tile with no vote
// or branch, for kernels at their register bound.
template <int kBlockN, bool kLazy = true>
__device__ __forceinline__ bool online_softmax(float (&s)[kBlockN / 2], int key0, int len,
                                               float scale_log2, int t, float (&row_max)[2],
                                               float (&row_sum)[2], uint32_t (&p)[kBlockN / 16][4],
                                               float (&alpha)[2], float slack, int key_lo = 0) {
  using namespace ptx;
  constexpr int kNTiles = kBlockN / 8;
  constexpr int kPSteps = kBlockN / 16;
  // Keys past the end or below key_lo exist only in the last tile; the
  // running max is kept scaled (log2 domain) and the raw maximum scaled once,
  // so each probability costs one FFMA and one ex2.
  if (key0 + kBlockN > len || key0 < key_lo) {
    const int first = key0 + 2 * t;
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = first + j * 8 + (e & 1);
        if (key >= len || key < key_lo) s[4 * j + e] = -INFINITY;
      }
  }
  // Four independent chains a row (columns 2t and 2t+1 of even and odd n8
  // tiles): with four warps a scheduler, a 16-long chain of dependent
  // instructions stalls the warp.
  float part_max[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int q = 0; q < 4; ++q) part_max[r][q] = -INFINITY;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& m = part_max[e >> 1][(j & 1) * 2 + (e & 1)];
      m = fmaxf(m, s[4 * j + e]);
    }
  float tile_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    tile_max[r] =
        fmaxf(fmaxf(part_max[r][0], part_max[r][1]), fmaxf(part_max[r][2], part_max[r][3]));
  bool grows = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = quad_max(tile_max[r]) * scale_log2;
    grows = grows || tile_max[r] > row_max[r] + slack;  // -inf + slack: -inf, so it grows
  }
  const bool rescale = !kLazy || __any_sync(0xffffffffu, grows);
  float neg_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rescale) {
      const float m = fmaxf(row_max[r], tile_max[r]);
      alpha[r] = fast_exp2(row_max[r] - m);
      row_max[r] = m;
      row_sum[r] *= alpha[r];
    } else {
      alpha[r] = 1.0f;
    }
    neg_max[r] = -row_max[r];
  }
#pragma unroll
  for (int kk = 0; kk < kPSteps; ++kk) {
    float e[8];
#pragma unroll
    for (int x = 0; x < 8; ++x)  // element x%4 of the n8 tile 2kk + x/4; row (x/2)%2
      e[x] = fast_exp2(fmaf(s[8 * kk + x], scale_log2, neg_max[(x >> 1) & 1]));
    row_sum[0] += (e[0] + e[1]) + (e[4] + e[5]);
    row_sum[1] += (e[2] + e[3]) + (e[6] + e[7]);
    p[kk][0] = pack_bf16(e[0], e[1]);
    p[kk][1] = pack_bf16(e[2], e[3]);
    p[kk][2] = pack_bf16(e[4], e[5]);
    p[kk][3] = pack_bf16(e[6], e[7]);
  }
  return rescale;
}

template <int kDPad>
__device__ __forceinline__ void rescale_o(float (&o)[kDPad / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < kDPad / 8; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      o[4 * j + 2 * r] *= alpha[r];
      o[4 * j + 2 * r + 1] *= alpha[r];
    }
  }
}

}  // namespace encoder_kit::cuda::sm90
