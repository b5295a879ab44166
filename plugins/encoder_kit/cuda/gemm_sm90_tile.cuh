// The pieces of a 128-row tile of our Hopper product (sm_90a) that more than
// one kernel uses: gemm_sm90.cu's products and mlp_sm90.cu's persistent MLP.
// Tile geometry, where SiLU·mul's gate and up rows lie in W, A's register
// fragments for the RMSNorm form, the SiLU·mul rounding, and how a
// warpgroup's 64 rows land in the 128-byte swizzled staging boxes that TMA
// stores. Device code only; included by .cu files of the sm_90a object library.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "tma_sm90.cuh"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace encoder_kit::cuda::gemm_tile {

using namespace ptx;
using namespace sm90;

// A tile is 128 rows by kTileN = 256 columns of W's rows, or 128 for SiLU·mul
// at few rows (256 rows: 54 tiles of 256 leave 78 of 132 multiprocessors
// idle; 108 tiles of 128 do not, without split-K's cluster reduction).
constexpr int kBM = 128, kBK = 64;
constexpr uint32_t kABytes = kBM * kBK * 2;       // 16 KiB a stage
constexpr uint32_t kSubTileBytes = kBM * 64 * 2;  // one 128 x 64 box of the output, 16 KiB

enum class Fused { Bias, SiluMul };

template <int kTileN>
__host__ __device__ constexpr uint32_t w_bytes() {  // W's box of a stage
  return kTileN * kBK * 2;
}

// W's row under column `col` of tile column block tile_n. Plain: rows
// [kTileN tile_n, + kTileN). SiLU·mul: the tile covers kTileN / 2 features
// from f0 = tile_n kTileN / 2, whose gate rows lie at f0's place in its block
// of W's blocked rows (block_gate_up_rows: 128 gate rows, then their up rows)
// and whose up rows 128 further; columns [0, kTileN / 2) are the gate rows,
// the rest the up rows.
template <Fused kFused, int kTileN>
__device__ __forceinline__ int64_t w_row(int tile_n, int col) {
  if constexpr (kFused == Fused::Bias) {
    return static_cast<int64_t>(tile_n) * kTileN + col;
  } else {
    const int64_t f0 = static_cast<int64_t>(tile_n) * (kTileN / 2);
    const int64_t gate = f0 / kGateUpBlock * (2 * kGateUpBlock) + f0 % kGateUpBlock;
    return col < kTileN / 2 ? gate + col : gate + kGateUpBlock + (col - kTileN / 2);
  }
}

// RMSNorm (kNorm): A goes through registers, so that the norm's sums of
// squares read no extra shared memory (that traffic cost the staged-A form up
// to 40% on narrow tiles, which are bound by it). One warp's fragment of k
// step kk of a k-block in the m64nNk16 register layout (rows 16 warp + lane/4
// and + 8, columns 2(lane % 4) + {0, 1} and + 8), by ldmatrix from the
// 128-byte swizzled stage: 16-byte chunk j of row r lies at chunk j ^ (r % 8)
// of the row's 128 bytes (eight rows' chunks: eight bank groups, no conflict).
__device__ __forceinline__ void load_a_fragment(uint32_t a_tile, int warp, int lane, int kk,
                                                uint32_t (&frag)[4]) {
  const int r = 16 * warp + (lane & 7) + ((lane >> 3) & 1) * 8;  // matrices 0-3: a0..a3
  const int j = 2 * kk + (lane >> 4);
  ldmatrix_x4(frag, a_tile + static_cast<uint32_t>(r * 128 + ((j ^ (r & 7)) << 4)));
}
// sq[0] += the squares of this thread's values of row lane/4, sq[1] of row
// lane/4 + 8 (fragments a0, a2 and a1, a3).
__device__ __forceinline__ void add_squares(const uint32_t (&frag)[4], float (&sq)[2]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = __uint_as_float(frag[i] << 16), hi = __uint_as_float(frag[i] & 0xffff0000u);
    sq[i & 1] = fmaf(lo, lo, fmaf(hi, hi, sq[i & 1]));
  }
  // Done before the product is issued: reading a fragment while its wgmma is
  // in flight is undefined.
  asm volatile("" : "+f"(sq[0]), "+f"(sq[1]));
}

// The 256 multiplying threads, apart from the copier (named barrier 1).
__device__ __forceinline__ void sync_multipliers() {
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

// silu(gate) * up for four outputs (an accumulator group: two columns of two
// rows), rounded as the bf16 module rounds: gate and up to bf16, silu(gate)
// to bf16, then the product (one bf16 multiply of two bf16 values is the
// float product rounded once). Returns the two packed pairs (row, row + 8).
// The epilogue runs while the tensor cores idle and is bound by the
// multi-function unit, so two sigmoids share one reciprocal:
// 1 / (1 + e_0) = (1 + e_1) / ((1 + e_0)(1 + e_1)), each e = exp(-g) capped
// at 2^63 so that the product stays finite (a sigmoid below 2^-63 then reads
// as 2^-63: |silu| < 1e-17 either way). 6 MUFU operations for 4 outputs
// instead of 8.
__device__ __forceinline__ uint32_t silu_mul_bf16x2(float gate0, float gate1, uint32_t up) {
  const float2 g = unpack_bf16x2(pack_bf16(gate0, gate1));
  constexpr float kLog2e = 1.4426950408889634f;
  const float d0 = 1.0f + fast_exp2(fminf(-g.x * kLog2e, 63.0f));
  const float d1 = 1.0f + fast_exp2(fminf(-g.y * kLog2e, 63.0f));
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(d0 * d1));
  const uint32_t s = pack_bf16(g.x * (r * d1), g.y * (r * d0));
  __nv_bfloat162 x, y;
  memcpy(&x, &s, 4);
  memcpy(&y, &up, 4);
  const __nv_bfloat162 z = __hmul2(x, y);
  uint32_t out;
  memcpy(&out, &z, 4);
  return out;
}
__device__ __forceinline__ uint2 silu_mul_bf16x4(const float (&gate)[4], const float (&up)[4]) {
  return make_uint2(silu_mul_bf16x2(gate[0], gate[1], pack_bf16(up[0], up[1])),
                    silu_mul_bf16x2(gate[2], gate[3], pack_bf16(up[2], up[3])));
}

// Where a thread's pair of output column group j (columns 8j + 2t, + 1 of
// the tile) lies in the staging boxes, for its first row row0: a 128 x 64 box
// per 64 columns, 128-byte swizzled as TMA stores it (16-byte chunk c of row r
// at chunk c ^ (r % 8)); row row0 + 8 lies 8 * 128 bytes further. The thread
// passes its row0 * 128 + 4t once (row_off) and row0 % 8 = lane / 4 (r7). A
// warp's lanes (8 rows x 4 pairs of one chunk) write 32 different banks.
__device__ __forceinline__ uint32_t staging_offset(int j, uint32_t row_off, int r7) {
  return static_cast<uint32_t>((j / 8) * kSubTileBytes) + row_off + (((j & 7) ^ r7) << 4);
}

// A warpgroup's 64 rows of an unsplit tile into the staging boxes at s_out:
// the products plus bias (plus the residual already staged there, has_res)
// as bf16, or for SiLU·mul the gated product of the tile's two halves. acc in
// the m64nNk16 layout (acc[4j + {0,1}]: row row0, columns 8j + 2t + {0,1};
// acc[4j + {2,3}]: row row0 + 8); bias_pairs[j]: those columns' biases;
// row_off, r7: as staging_offset takes them.
template <Fused kFused, int kTileN>
__device__ __forceinline__ void stage_rows(const float (&acc)[kTileN / 2],
                                           const uint32_t (&bias_pairs)[kTileN / 8], uint32_t s_out,
                                           uint32_t row_off, int r7, int has_res) {
  if constexpr (kFused == Fused::Bias) {
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      const float2 b = unpack_bf16x2(bias_pairs[j]);
      const uint32_t addr = s_out + staging_offset(j, row_off, r7);
      float2 r0 = make_float2(0.0f, 0.0f), r1 = r0;
      if (has_res) {
        r0 = unpack_bf16x2(ld_shared_u32(addr));
        r1 = unpack_bf16x2(ld_shared_u32(addr + 8 * 128));
      }
      st_shared_u32(addr, pack_bf16(acc[4 * j] + b.x + r0.x, acc[4 * j + 1] + b.y + r0.y));
      st_shared_u32(addr + 8 * 128,
                    pack_bf16(acc[4 * j + 2] + b.x + r1.x, acc[4 * j + 3] + b.y + r1.y));
    }
  } else {
    // Tile columns [0, kTileN / 2) are gate rows of the tile's features, the
    // rest their up rows (w_row, block_gate_up_rows). As the bf16 module
    // computes it: gate and up rounded, silu(gate) rounded, then the product.
    (void)has_res;
#pragma unroll
    for (int j = 0; j < kTileN / 16; ++j) {
      const float2 bg = unpack_bf16x2(bias_pairs[j]);
      const float2 bu = unpack_bf16x2(bias_pairs[j + kTileN / 16]);
      const int ju = j + kTileN / 16;  // the up rows' accumulators
      const float gate[4] = {acc[4 * j] + bg.x, acc[4 * j + 1] + bg.y, acc[4 * j + 2] + bg.x,
                             acc[4 * j + 3] + bg.y};
      const float up[4] = {acc[4 * ju] + bu.x, acc[4 * ju + 1] + bu.y, acc[4 * ju + 2] + bu.x,
                           acc[4 * ju + 3] + bu.y};
      const uint2 y = silu_mul_bf16x4(gate, up);
      const uint32_t addr = s_out + staging_offset(j, row_off, r7);
      st_shared_u32(addr, y.x);
      st_shared_u32(addr + 8 * 128, y.y);
    }
  }
}

// One 64-deep k-block of a warpgroup's 64 rows, A from registers (the RMSNorm
// form): each k step loads its A fragment, adds its squares and issues its
// product; one commit group a k step, two in flight, so the fragments of
// those two stay untouched while the next is loaded (fragment buffer kk: the
// groups in flight when step kk loads are kk - 1 and kk - 2, mod 4). Once the
// previous k-block's last step is done (after step 1), its stage is released
// on prev_empty when release_prev.
template <int kTileN>
__device__ __forceinline__ void k_block_norm(float (&acc)[kTileN / 2],
                                             uint32_t (&frag)[kBK / 16][4], float (&squares)[2],
                                             uint32_t a_tile, uint32_t w_tile, int warp, int lane,
                                             bool first, bool release_prev, uint32_t prev_empty) {
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    load_a_fragment(a_tile, warp, lane, kk, frag[kk]);
    add_squares(frag[kk], squares);
    wgmma_fence();
    const int accumulate = !first || kk != 0;
    const uint64_t desc_w = smem_desc_sw128(w_tile + kk * 32);
    if constexpr (kTileN == 256)
      wgmma_m64n256k16_rs_kmajor(acc, frag[kk], desc_w, accumulate);
    else
      wgmma_m64n128k16_rs_kmajor(acc, frag[kk], desc_w, accumulate);
    wgmma_commit();
    wgmma_wait<2>();
    if (kk == 1 && release_prev) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(prev_empty);
    }
  }
}

// One 64-deep k-block of a warpgroup's 64 rows, both operands from the staged
// boxes, issued as one commit group (the caller waits for it).
template <int kTileN>
__device__ __forceinline__ void k_block_ss(float (&acc)[kTileN / 2], uint32_t a_tile,
                                           uint32_t w_tile, bool first) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    const int accumulate = !first || kk != 0;
    const uint64_t desc_a = smem_desc_sw128(a_tile + kk * 32);
    const uint64_t desc_w = smem_desc_sw128(w_tile + kk * 32);
    if constexpr (kTileN == 256)
      wgmma_m64n256k16_ss(acc, desc_a, desc_w, accumulate);
    else
      wgmma_m64n128k16_ss(acc, desc_a, desc_w, accumulate);
  }
  wgmma_commit();
}

}  // namespace encoder_kit::cuda::gemm_tile
