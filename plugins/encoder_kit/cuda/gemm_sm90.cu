// Matrix products of our own on Hopper (sm_90a), for what cuBLASLt's epilogues
// cannot fuse: C = A W^T (+ bias) with the SwiGLU product silu(gate) * up in the
// epilogue, so the MLP's [gate | up] output never reaches global memory.
//
// Layout of a block (FlashAttention-3 / CUTLASS "warp-specialised" form):
//  - warpgroup 0 copies: one thread issues TMA loads of A (128 x 64) and W
//    (256 x 64, or 128 x 64 for narrow tiles) boxes into a ring of kStages
//    stages, each completing on the stage's "full" mbarrier; it gives most of
//    its registers back;
//  - warpgroups 1 and 2 multiply: each owns 64 rows of the 128 x 256 (or 128)
//    tile and runs m64n256k16 (m64n128k16) wgmma steps on the staged boxes
//    (128-byte swizzled, K-major), keeping one k-block of products in flight
//    (two k steps with the norm, below); after a stage's products have
//    completed, each of their warps arrives on its "empty" mbarrier, and the
//    copier reuses the stage once all eight have.
//  - the epilogue runs from the accumulators: bias, then either the plain bf16
//    product or, with W's rows blocked as [128 gate | 128 up], the SwiGLU
//    product of a tile's two halves, gate rows and the same features' up rows
//    (gate_up_silu_mul_bf16). The tile is staged in shared memory as 128-byte
//    swizzled 128 x 64 boxes, and one thread stores them by TMA while the next
//    tile's products start.
//  - optionally an RMSNorm of A's rows in front (rms_gate_up_silu_mul_bf16,
//    rms_linear_bf16): A's k columns are a whole row, so the multipliers
//    load A's fragments from the staged boxes into registers (ldmatrix; wgmma then reads A from
//    registers), sum each row's squares from them, and the epilogue scales the row's products by
//    rsqrt(mean + eps). The norm's weight is folded into W's columns (fold_norm_weight), so the
//    normalised rows are never written.
// One persistent block a multiprocessor, looping over tiles: 3 stages (144
// KiB) and a 64 KiB output tile for the plain product, 4 stages (192 KiB) and
// 32 KiB for SiLU·mul; narrow tiles 6 stages of 32 KiB. Steps and
// measurements: bench/kernels/EXPERIMENTS.md.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"
#include "tensor_map.hpp"
#include "tma_sm90.cuh"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace encoder_kit::cuda {
namespace {

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
// The output tile is staged in shared memory as 128 x 64 boxes (128-byte
// swizzled, as TMA stores them): kTileN / 64 for the plain product, half as
// many for SiLU·mul, whose tile is half as wide. What is left of the 227 KiB
// holds the stages.
template <Fused kFused, int kTileN>
__host__ __device__ constexpr int out_boxes() {
  return kFused == Fused::Bias ? kTileN / 64 : kTileN / 128;
}
template <Fused kFused, int kTileN>
__host__ __device__ constexpr int stages() {
  return kTileN == 128 ? 6 : kFused == Fused::Bias ? 3 : 4;
}
template <Fused kFused, int kTileN>
constexpr size_t smem_bytes() {
  return 1024 /* alignment slack */ + stages<kFused, kTileN>() * (kABytes + w_bytes<kTileN>()) +
         out_boxes<kFused, kTileN>() * kSubTileBytes +
         (2 * stages<kFused, kTileN>() + 1) * sizeof(uint64_t);
}
// Split-K: a block's fp32 partial tile (128 x kTileN) lands in its stage
// buffers once its products are done, its rows' sums of squares after it.
template <int kTileN>
__host__ __device__ constexpr uint32_t partial_bytes() {
  return kBM * kTileN * 4;
}
template <Fused kFused, int kTileN>
constexpr bool partial_fits() {
  return partial_bytes<kTileN>() + kBM * 4 <=
             stages<kFused, kTileN>() * (kABytes + w_bytes<kTileN>()) &&
         smem_bytes<kFused, kTileN>() <= 227 * 1024;
}
static_assert(partial_fits<Fused::Bias, 256>() && partial_fits<Fused::SiluMul, 256>() &&
              partial_fits<Fused::SiluMul, 128>());
static_assert(kGateUpBlock == 128, "a SiLU·mul tile's gate and up halves lie in one block");
constexpr int kMaxSplits = 8;  // a portable cluster

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

// The residual's boxes [box_lo, box_hi) of the tile at (m0, col0) into the
// staging boxes, completing on `bar` (boxes wholly right of the matrix are
// skipped: nothing to add there, nothing stored).
__device__ __forceinline__ void load_residual(const CUtensorMap* map_res, uint32_t s_out,
                                              uint32_t bar, int box_lo, int box_hi, int col0,
                                              int m0, int64_t out_cols) {
  int boxes = 0;
  for (int b = box_lo; b < box_hi; ++b) boxes += col0 + 64 * b < out_cols;
  mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(boxes) * kSubTileBytes);
  for (int b = box_lo; b < box_hi; ++b)
    if (col0 + 64 * b < out_cols)
      tma_load_2d(s_out + b * kSubTileBytes, map_res, col0 + 64 * b, m0, bar);
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

// Two modes, one tile loop each:
//  - kSplit = false: persistent, one block a multiprocessor; block b takes
//    tiles b, b + gridDim.x, ... (the tile's n index fastest, so blocks running
//    together share A's rows in L2), and the stage ring runs on across tiles:
//    the copier fills the next tile's first stages while the multipliers are
//    still in the epilogue of the current one.
//  - kSplit = true (few tiles, e.g. 256 rows: 10 tiles of a 1280-wide output
//    for 132 multiprocessors): a cluster of `splits` blocks per tile, block r
//    multiplying the r-th slice of the k-blocks. Each leaves its fp32 partial
//    tile in its shared memory; after a cluster barrier, block r sums the
//    partials of columns [r, r + 1) * 256 / splits from all of them (through
//    distributed shared memory) and writes the results into the staging boxes
//    of the block that stores them (the rank of the box's first column).
// Residual (plain form): out = A W^T + bias + residual, from a tensor map of
// the same shape as out (it may be out itself), TMA-loaded into the staging
// boxes, where each thread reads the pair it then overwrites.
// RMSNorm (kNorm; rms_cols = A's k columns): each product row is scaled by
// rsqrt(sum of the row's squares / rms_cols + rms_eps) before the bias; in
// split mode the blocks of a cluster add their slices' sums through
// distributed shared memory, beside the partial tiles.
template <Fused kFused, bool kSplit, int kTileN, bool kNorm>
__global__ void __launch_bounds__(384, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_w,
                     const __grid_constant__ CUtensorMap map_out,
                     const __grid_constant__ CUtensorMap map_res, const bf16* __restrict__ bias,
                     int64_t bias_len, int64_t out_cols, int has_res, int k_blocks, int n_tiles,
                     int num_tiles, int splits, int rms_cols, float rms_eps) {
#if ENCODER_KIT_HAS_WGMMA
  constexpr int kStages = stages<kFused, kTileN>();
  constexpr uint32_t kWBytes = w_bytes<kTileN>();
  constexpr uint32_t kPartialBytes = partial_bytes<kTileN>();
  constexpr int kOutCols = kFused == Fused::Bias ? kTileN : kTileN / 2;
  constexpr int kOutGroups = kOutCols / 8;  // groups of 8 output columns a tile
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // 128-byte swizzle atoms
  const uint32_t s_a = base;
  const uint32_t s_w = base + kStages * kABytes;
  const uint32_t s_out = s_w + kStages * kWBytes;
  const uint32_t full = s_out + out_boxes<kFused, kTileN>() * kSubTileBytes;  // kStages mbarriers,
  const uint32_t empty = full + kStages * 8;     // then kStages "empty",
  const uint32_t res_bar = empty + kStages * 8;  // then the residual's
  const int wg = static_cast<int>(threadIdx.x) / 128;
  // Only the plain form adds a residual (SiLU·mul is never given one): the
  // SiLU·mul kernels leave that code out.
  if constexpr (kFused != Fused::Bias) has_res = 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);   // the copier's expect_tx arrival (+ the bytes)
      mbarrier_init(empty + 8 * s, 8);  // one arrival per multiplying warp
    }
    mbarrier_init(res_bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  detail::wait_for_prior_grid();  // A is the previous kernel's output (launch.cuh)

  // Split mode: this block's tile and k-blocks.
  const int rank = kSplit ? static_cast<int>(cluster_rank()) : 0;
  const int first_tile =
      kSplit ? static_cast<int>(blockIdx.x) / splits : static_cast<int>(blockIdx.x);
  const int tile_step = kSplit ? num_tiles : static_cast<int>(gridDim.x);  // one tile a cluster
  const int kb_lo = kSplit ? rank * k_blocks / splits : 0;
  const int kb_hi = kSplit ? (rank + 1) * k_blocks / splits : k_blocks;

  if (wg == 0) {
    release_registers<40>();
    if (threadIdx.x == 0) {
      int it = 0;  // k-blocks issued so far, over all tiles
      for (int tile = first_tile; tile < num_tiles; tile += tile_step) {
        const int m0 = (tile / n_tiles) * kBM, tile_n = tile % n_tiles;
        for (int kb = kb_lo; kb < kb_hi; ++kb, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbarrier_wait(empty + 8 * s, ((it / kStages) - 1) & 1);
          mbarrier_arrive_expect_tx(full + 8 * s, kABytes + kWBytes);
          tma_load_2d(s_a + s * kABytes, &map_a, kb * kBK, m0, full + 8 * s);
          if constexpr (kFused == Fused::Bias) {
            tma_load_2d(s_w + s * kWBytes, &map_w, kb * kBK,
                        static_cast<int>(w_row<kFused, kTileN>(tile_n, 0)), full + 8 * s);
          } else {  // the gate rows, then the up rows (boxes of kTileN / 2 rows)
            for (int h = 0; h < 2; ++h)
              tma_load_2d(s_w + s * kWBytes + h * (kWBytes / 2), &map_w, kb * kBK,
                          static_cast<int>(w_row<kFused, kTileN>(tile_n, h * kTileN / 2)),
                          full + 8 * s);
          }
        }
      }
    }
    if constexpr (kSplit) {  // every thread of the cluster takes part in its barriers
      cluster_sync();
      cluster_sync();
    }
    return;
  }

  claim_registers<232>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of each tile
  const int warp = (static_cast<int>(threadIdx.x) / 32) % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int t = lane % 4;
  const bool storer = threadIdx.x == 128;  // issues the output tile's TMA stores
  // Output column groups this block finishes, and the staging boxes it stores.
  const int per_rank = kOutGroups / splits;
  const int g_lo = rank * per_rank, g_hi = g_lo + per_rank;
  const int box_lo = (g_lo + 7) / 8, box_hi = (g_hi + 7) / 8;
  float acc[kTileN / 2];
  int it = 0;          // k-blocks consumed so far, over all tiles
  int tiles_done = 0;  // the residual barrier's phase
  for (int tile = first_tile; tile < num_tiles; tile += tile_step, ++tiles_done) {
    const int tile_n = tile % n_tiles;
    const int m0 = (tile / n_tiles) * kBM;
    const int col0 = tile_n * kOutCols;
    if constexpr (kSplit) {
      if (has_res && storer)
        load_residual(&map_res, s_out, res_bar, box_lo, box_hi, col0, m0, out_cols);
    }
    float squares[2] = {0.0f, 0.0f};  // kNorm: this thread's two rows, its columns
    uint32_t frag[kBK / 16][4];       // kNorm: A's fragments, one a k step
    for (int kb = kb_lo; kb < kb_hi; ++kb, ++it) {
      const int s = it % kStages;
      mbarrier_wait(full + 8 * s, (it / kStages) & 1);
      const uint32_t a_tile = s_a + s * kABytes + c * (64 * 128);
      const uint32_t w_tile = s_w + s * kWBytes;
      if constexpr (kNorm) {
        // One commit group a k step, two in flight: the fragments of those two
        // stay untouched while the next is loaded (12 registers, within the
        // 168 beside the accumulators). Fragment buffer kk: the groups in
        // flight when step kk loads are kk - 1 and kk - 2 (mod 4).
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          load_a_fragment(a_tile, warp, lane, kk, frag[kk]);
          add_squares(frag[kk], squares);
          wgmma_fence();
          const int accumulate = kb != kb_lo || kk != 0;
          const uint64_t desc_w = smem_desc_sw128(w_tile + kk * 32);
          if constexpr (kTileN == 256)
            wgmma_m64n256k16_rs_kmajor(acc, frag[kk], desc_w, accumulate);
          else
            wgmma_m64n128k16_rs_kmajor(acc, frag[kk], desc_w, accumulate);
          wgmma_commit();
          wgmma_wait<2>();
          if (kk == 1 && kb > kb_lo) {  // the previous k-block's last step is done
            __syncwarp();
            if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
          }
        }
      } else {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          const int accumulate = kb != kb_lo || kk != 0;
          const uint64_t desc_a = smem_desc_sw128(a_tile + kk * 32);
          const uint64_t desc_w = smem_desc_sw128(w_tile + kk * 32);
          if constexpr (kTileN == 256)
            wgmma_m64n256k16_ss(acc, desc_a, desc_w, accumulate);
          else
            wgmma_m64n128k16_ss(acc, desc_a, desc_w, accumulate);
        }
        wgmma_commit();
      }
      if constexpr (!kSplit) {
        // The residual into the staging boxes once the previous tile's stores
        // have read them; its load flies during this tile's products.
        if (kb == kb_lo && has_res && storer) {
          bulk_wait_read<0>();
          load_residual(&map_res, s_out, res_bar, 0, out_boxes<kFused, kTileN>(), col0, m0,
                        out_cols);
        }
      }
      if constexpr (!kNorm) {
        wgmma_wait<1>();  // the previous k-block's products have read their stage
        if (kb > kb_lo) {
          __syncwarp();
          if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
        }
      }
    }
    // The epilogue's bias pairs (columns 8j + 2t of the tile), loaded while
    // the last k-block's products run. Not earlier: every wgmma_fence of the
    // main loop would wait for loads still in flight (one load a pair;
    // bias_len is a multiple of 8). The split form reads its own later.
    uint32_t bias_pairs[kTileN / 8];
    auto load_bias_pairs = [&] {
#pragma unroll
      for (int j = 0; j < kTileN / 8; ++j) {
        const int64_t n = w_row<kFused, kTileN>(tile_n, 8 * j + 2 * t);
        bias_pairs[j] = bias && n < bias_len ? ld_global_nc_u32(bias + n) : 0u;
      }
    };
    if constexpr (!kSplit) load_bias_pairs();
    wgmma_wait<0>();
    fence_registers(acc);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));  // the tile's last stage

    // acc[4j + {0,1}]: row 16 warp + lane/4, columns 8j + 2(lane%4) + {0,1};
    // acc[4j + {2,3}]: the same columns, 8 rows further.
    const int row0 = 64 * c + 16 * warp + lane / 4;  // in the tile
    // kNorm: this thread's rows' sums of squares over this block's k-blocks,
    // from the four lanes that hold the rows' columns.
    float row_squares[2] = {squares[0], squares[1]};
    if constexpr (kNorm)
      for (float& v : row_squares) {
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
      }
    auto rms_scale = [&](float sum) {
      return rsqrtf(sum / static_cast<float>(rms_cols) + rms_eps);
    };
    if constexpr (kSplit) {
      // This block's partial tile, in fragment order (thread-fastest float4s:
      // conflict-free here, coalesced for the blocks that read it), over the
      // stage buffers once both warpgroups' products have read them.
      const int tid = static_cast<int>(threadIdx.x) - 128;
      sync_multipliers();
#pragma unroll
      for (int g = 0; g < kTileN / 8; ++g)
        st_shared_f32x4(s_a + static_cast<uint32_t>(g * 256 + tid) * 16, acc[4 * g], acc[4 * g + 1],
                        acc[4 * g + 2], acc[4 * g + 3]);
      // RMSNorm: this slice's sums of squares of the tile's rows, after the
      // partial tile (one float a row).
      if (kNorm && t == 0)
        for (int h = 0; h < 2; ++h)
          st_shared_f32(s_a + kPartialBytes + static_cast<uint32_t>(row0 + 8 * h) * 4,
                        row_squares[h]);
      if (has_res && box_lo < box_hi) mbarrier_wait(res_bar, tiles_done & 1);
      cluster_sync();  // every partial (and residual box) of the cluster is in place
      // This block's output columns: the partials of every block of the
      // cluster, read in rank order through distributed shared memory
      // (generic pointers, so that the compiler keeps several reads in flight).
      unsigned char* const smem = smem_raw + (base - smem_addr(smem_raw));
      const float4* part[kMaxSplits];
#pragma unroll
      for (int q = 0; q < kMaxSplits; ++q)
        part[q] = q < splits ? static_cast<const float4*>(
                                   __cluster_map_shared_rank(smem, static_cast<unsigned>(q))) +
                                   tid
                             : nullptr;
      float scale[2] = {1.0f, 1.0f};  // RMSNorm: this thread's two rows
      if constexpr (kNorm) {
        for (int h = 0; h < 2; ++h) {
          float sum = 0.0f;
          for (int q = 0; q < splits; ++q)
            sum += reinterpret_cast<const float*>(__cluster_map_shared_rank(
                smem, static_cast<unsigned>(q)))[kPartialBytes / 4 + row0 + 8 * h];
          scale[h] = rms_scale(sum);
        }
      }
      auto partial_sum = [&](int g) {
        float4 v = part[0][g * 256];
#pragma unroll
        for (int q = 1; q < kMaxSplits; ++q)
          if (q < splits) {
            const float4 p = part[q][g * 256];
            v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
          }
        if constexpr (kNorm) v.x *= scale[0], v.y *= scale[0], v.z *= scale[1], v.w *= scale[1];
        return v;
      };
      auto bias_pair = [&](int g) {  // columns 8g + 2t, + 1 of the tile
        const int64_t n = w_row<kFused, kTileN>(tile_n, 8 * g + 2 * t);
        return unpack_bf16x2(bias && n < bias_len ? ld_global_nc_u32(bias + n) : 0u);
      };
      // The staging pair of output group j, in the block that stores its box.
      auto staged = [&](int j) {
        return static_cast<uint32_t*>(__cluster_map_shared_rank(
            smem + (s_out - base) +
                staging_offset(j, static_cast<uint32_t>(row0) * 128 + 4 * t, row0 & 7),
            static_cast<unsigned>((j / 8) * 8 / per_rank)));
      };
      // (Two output groups at a time for the plain form; SiLU·mul reads twice
      // the partials a group and stays within the 168 registers at one.)
#pragma unroll(kFused == Fused::Bias ? 2 : 1)
      for (int j = g_lo; j < g_hi; ++j) {
        uint32_t* const out = staged(j);
        if constexpr (kFused == Fused::Bias) {
          const float4 v = partial_sum(j);
          const float2 b = bias_pair(j);
          float2 r0 = make_float2(0.0f, 0.0f), r1 = r0;
          if (has_res) {
            r0 = unpack_bf16x2(out[0]);
            r1 = unpack_bf16x2(out[8 * 128 / 4]);
          }
          out[0] = pack_bf16(v.x + b.x + r0.x, v.y + b.y + r0.y);
          out[8 * 128 / 4] = pack_bf16(v.z + b.x + r1.x, v.w + b.y + r1.y);
        } else {
          const float4 vg = partial_sum(j), vu = partial_sum(j + kTileN / 16);
          const float2 bg = bias_pair(j), bu = bias_pair(j + kTileN / 16);
          const float gate[4] = {vg.x + bg.x, vg.y + bg.y, vg.z + bg.x, vg.w + bg.y};
          const float up[4] = {vu.x + bu.x, vu.y + bu.y, vu.z + bu.x, vu.w + bu.y};
          const uint2 y = silu_mul_bf16x4(gate, up);
          out[0] = y.x;
          out[8 * 128 / 4] = y.y;
        }
      }
      // Generic-proxy writes, read by the TMA unit of the block that stores them.
      fence_async_shared_cluster();
      cluster_sync();  // the staging boxes are complete; no block reads another's any more
    } else {
      if constexpr (kNorm) {
        const float s0 = rms_scale(row_squares[0]), s1 = rms_scale(row_squares[1]);
#pragma unroll
        for (int i = 0; i < kTileN / 2; ++i) acc[i] *= (i & 2) ? s1 : s0;
      }
      // The previous tile's stores must have read the staging boxes.
      if (storer) bulk_wait_read<0>();
      sync_multipliers();
      if (has_res) mbarrier_wait(res_bar, tiles_done & 1);
      // (row0 % 8 = lane / 4, which the compiler cannot know from row0)
      stage_rows<kFused, kTileN>(acc, bias_pairs, s_out, static_cast<uint32_t>(row0) * 128 + 4 * t,
                                 lane / 4, has_res);
      // Generic-proxy writes, read by the TMA unit: fence, then one thread
      // stores the boxes.
      fence_async_shared();
      sync_multipliers();
    }
    // Rows and columns outside the output are clipped by the map.
    if (storer) {
      if constexpr (kSplit) fence_async_shared();
      for (int box = box_lo; box < box_hi; ++box)
        if (col0 + 64 * box < out_cols)
          tma_store_2d(&map_out, s_out + box * kSubTileBytes, col0 + box * 64, m0);
      bulk_commit();
    }
  }                            // tiles
  if (storer) bulk_wait<0>();  // the last stores complete before the block leaves
#else
  (void)map_a, (void)map_w, (void)map_out, (void)map_res, (void)bias, (void)bias_len,
      (void)out_cols, (void)has_res, (void)k_blocks, (void)n_tiles, (void)num_tiles, (void)splits,
      (void)rms_cols, (void)rms_eps;
  __trap();
#endif
}

}  // namespace

PFN_cuTensorMapEncodeTiled_v12000 detail::tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      p = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

int detail::encode_bf16_tiled(CUtensorMap* map, const bf16* data, unsigned rank,
                              const cuuint64_t* dims, const cuuint64_t* strides,
                              const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                              CUtensorMapL2promotion l2_promotion) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  ENCODER_KIT_REQUIRE(encode != nullptr);
  ENCODER_KIT_REQUIRE(rank >= 1 && rank <= 5);
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUresult status =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<bf16*>(data), dims, strides,
             box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2_promotion,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ENCODER_KIT_REQUIRE(status == CUDA_SUCCESS);
  return 0;
}

namespace {

// A row-major bf16 matrix of rows x cols (row stride ld elements), moved in
// boxes of box_rows x 64 columns, 128-byte swizzled; boxes read zeros outside
// the matrix, and stores into it are clipped to it.
int encode_rows(CUtensorMap* map, const bf16* data, int64_t rows, int64_t cols, int64_t ld,
                int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(bf16)};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  return detail::encode_bf16_tiled(map, data, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// How many blocks share a tile's k-blocks when `splits` is 0 (automatic): the
// most (8, 4 or 2) that keep every tile's cluster in one wave of the
// multiprocessors with at least two k-blocks each; 1 when the tiles fill the
// GPU by themselves.
int auto_splits(int64_t num_tiles, int64_t k_blocks, int sms) {
  for (const int s : {8, 4, 2})
    if (num_tiles * s <= sms && k_blocks >= 2 * s) return s;
  return 1;
}

// Whether a cluster of `splits` blocks of `kernel` (a whole multiprocessor's
// shared memory each) can run on this device at all: one GPC must hold them
// (not so on every GPU, e.g. a small MIG slice). Asked once per device,
// kernel and size; a host query, legal while a graph is captured.
template <typename Kernel>
bool clusters_fit(Kernel* kernel, size_t smem, int splits) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int>, bool> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), splits);
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(splits);
  attribute.val.clusterDim.y = attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(splits));
  config.blockDim = dim3(384);
  config.dynamicSmemBytes = smem;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  const bool fit =
      cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters > 0;
  (void)cudaGetLastError();
  known[key] = fit;
  return fit;
}

// Valid tile widths and splits (0: chosen), checked before an empty call returns.
bool tile_n_ok(int tile_n) {
  return tile_n == 0 || tile_n == 128 || tile_n == 256;
}
bool splits_ok(int splits) {
  return splits == 0 || splits == 1 || splits == 2 || splits == 4 || splits == 8;
}

// out[rows x cols] (row stride ld_out) from A[rows x k] and W[w_rows x k],
// plus residual (same shape and stride as out; may be out) when given.
// kNorm: RMSNorm of A's rows in front, eps rms_eps (the kernel's rms_cols = k).
template <Fused kFused, int kTileN, bool kNorm>
int launch_tiles(const bf16* a, const bf16* w, int64_t w_rows, const bf16* bias,
                 const bf16* residual, bf16* out, int64_t rows, int64_t k, int64_t cols,
                 int64_t ld_out, int splits, cudaStream_t stream, float rms_eps, int sms) {
  const int64_t m_tiles = (rows + kBM - 1) / kBM;
  const int64_t n_tiles = (w_rows + kTileN - 1) / kTileN;
  const int64_t num_tiles = m_tiles * n_tiles;
  const int k_blocks = static_cast<int>((k + kBK - 1) / kBK);
  ENCODER_KIT_REQUIRE(num_tiles * kMaxSplits <= int64_t{0x7fffffff});
  if (splits == 0) splits = auto_splits(num_tiles, k_blocks, sms);
  while (splits > k_blocks) splits /= 2;  // every block at least one k-block
  CUtensorMap map_a{}, map_w{}, map_out{}, map_res{};
  if (const int err = encode_rows(&map_a, a, rows, k, k, kBM)) return err;
  // (SiLU·mul loads its gate and up rows as two boxes of half the tile)
  if (const int err =
          encode_rows(&map_w, w, w_rows, k, k, kFused == Fused::Bias ? kTileN : kTileN / 2))
    return err;
  if (const int err = encode_rows(&map_out, out, rows, cols, ld_out, kBM)) return err;
  if (residual != nullptr)
    if (const int err = encode_rows(&map_res, residual, rows, cols, ld_out, kBM)) return err;
  const int has_res = residual != nullptr ? 1 : 0;
  const int rms_cols = kNorm ? static_cast<int>(k) : 0;
  constexpr size_t kSmem = smem_bytes<kFused, kTileN>();
  auto* split_kernel = gemm_sm90_kernel<kFused, true, kTileN, kNorm>;
  if (splits > 1) {
    if (const int err = detail::opt_in_dynamic_smem(split_kernel, kSmem)) return err;
    while (splits > 1 && !clusters_fit(split_kernel, kSmem, splits)) splits /= 2;  // same sums
  }
  if (splits == 1) {
    auto* kernel = gemm_sm90_kernel<kFused, false, kTileN, kNorm>;
    if (const int err = detail::opt_in_dynamic_smem(kernel, kSmem)) return err;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(num_tiles, sms));
    return detail::launch_kernel(kernel, dim3(grid), dim3(384), kSmem, stream, map_a, map_w,
                                 map_out, map_res, bias, w_rows, cols, has_res, k_blocks,
                                 static_cast<int>(n_tiles), static_cast<int>(num_tiles), 1,
                                 rms_cols, rms_eps);
  }
  return detail::launch_kernel_in_clusters(
      split_kernel, dim3(static_cast<unsigned>(num_tiles * splits)), dim3(384), kSmem, stream,
      static_cast<unsigned>(splits), map_a, map_w, map_out, map_res, bias, w_rows, cols, has_res,
      k_blocks, static_cast<int>(n_tiles), static_cast<int>(num_tiles), splits, rms_cols, rms_eps);
}

// tile_n: 256, 128 (SiLU·mul only), or 0: 128 for SiLU·mul when tiles of 256
// would leave multiprocessors idle, else 256. rms_eps >= 0: the RMSNorm of A's
// rows inside (tiles of 256 for the plain product).
template <Fused kFused>
int launch(const bf16* a, const bf16* w, int64_t w_rows, const bf16* bias, const bf16* residual,
           bf16* out, int64_t rows, int64_t k, int64_t cols, int64_t ld_out, int splits,
           cudaStream_t stream, float rms_eps = -1.0f, int tile_n = 256) {
  ENCODER_KIT_REQUIRE(detail::sm90_gemm_supported());
  ENCODER_KIT_REQUIRE(rows <= int64_t{0x7fffffff} && w_rows <= int64_t{0x7fffffff});
  ENCODER_KIT_REQUIRE(splits_ok(splits));
  ENCODER_KIT_REQUIRE(tile_n == 0 || tile_n == 256 || (tile_n == 128 && kFused == Fused::SiluMul));
  int device = 0, sms = 0;
  ENCODER_KIT_CUDA_TRY(cudaGetDevice(&device));
  ENCODER_KIT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool norm = rms_eps >= 0.0f;
  ENCODER_KIT_REQUIRE(!norm || residual == nullptr);  // no entry adds one to a normed product
  if (tile_n == 0)
    tile_n = kFused == Fused::SiluMul && ((rows + kBM - 1) / kBM) * ((w_rows + 255) / 256) < sms
                 ? 128
                 : 256;
  if constexpr (kFused == Fused::SiluMul) {
    if (tile_n == 128)
      return norm ? launch_tiles<kFused, 128, true>(a, w, w_rows, bias, residual, out, rows, k,
                                                    cols, ld_out, splits, stream, rms_eps, sms)
                  : launch_tiles<kFused, 128, false>(a, w, w_rows, bias, residual, out, rows, k,
                                                     cols, ld_out, splits, stream, rms_eps, sms);
  }
  if (norm)
    return launch_tiles<kFused, 256, true>(a, w, w_rows, bias, residual, out, rows, k, cols, ld_out,
                                           splits, stream, rms_eps, sms);
  return launch_tiles<kFused, 256, false>(a, w, w_rows, bias, residual, out, rows, k, cols, ld_out,
                                          splits, stream, rms_eps, sms);
}

// The rules both entries share: TMA wants 16-byte aligned rows and bases; the
// bias is read in pairs.
bool operands_ok(const bf16* a, const bf16* w, const bf16* bias, const bf16* out, int64_t k,
                 int64_t ld_out) {
  return a != nullptr && w != nullptr && out != nullptr &&
         reinterpret_cast<uintptr_t>(bias) % 4 == 0 && detail::aligned16(a) &&
         detail::aligned16(w) && detail::aligned16(out) && k > 0 && k % 8 == 0 &&
         k <= int64_t{0x7fffffff} && ld_out % 8 == 0;
}

}  // namespace

namespace detail {

bool sm90_gemm_supported() {
  return sm90_attention_supported() && tensor_map_encoder() != nullptr;
}

int gemm_sm90_auto_splits(int64_t rows, int64_t n, int64_t k) {
  int device = 0, sms = 0;
  if (rows <= 0 || n <= 0 || k <= 0 || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return auto_splits(((rows + kBM - 1) / kBM) * ((n + 255) / 256), (k + kBK - 1) / kBK, sms);
}

int gemm_sm90_bf16(const bf16* a, const bf16* w, const bf16* bias, const bf16* residual, bf16* c,
                   int64_t rows, int64_t n, int64_t k, int splits, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && n > 0 && n % 8 == 0);
  ENCODER_KIT_REQUIRE(operands_ok(a, w, bias, c, k, n));
  ENCODER_KIT_REQUIRE(residual == nullptr || detail::aligned16(residual));
  ENCODER_KIT_REQUIRE(splits_ok(splits));
  if (rows == 0) return 0;
  return launch<Fused::Bias>(a, w, n, bias, residual, c, rows, k, n, n, splits, stream);
}

}  // namespace detail

int64_t gate_up_blocked_rows(int64_t inter) {
  return inter <= 0 ? 0 : 2 * kGateUpBlock * ((inter + kGateUpBlock - 1) / kGateUpBlock);
}

bool gate_up_silu_mul_supported() {
  return detail::sm90_gemm_supported();
}

int gate_up_silu_mul_bf16(const bf16* x, const bf16* w_blocked, const bf16* b_blocked, bf16* y,
                          int64_t rows, int64_t k, int64_t inter, int64_t ld_y, cudaStream_t stream,
                          int splits, int tile_n) {
  ENCODER_KIT_REQUIRE(rows >= 0 && inter > 0 && inter % 8 == 0 && ld_y >= inter);
  ENCODER_KIT_REQUIRE(b_blocked != nullptr && tile_n_ok(tile_n) && splits_ok(splits));
  ENCODER_KIT_REQUIRE(operands_ok(x, w_blocked, b_blocked, y, k, ld_y));
  if (rows == 0) return 0;
  return launch<Fused::SiluMul>(x, w_blocked, gate_up_blocked_rows(inter), b_blocked, nullptr, y,
                                rows, k, inter, ld_y, splits, stream, -1.0f, tile_n);
}

int rms_gate_up_silu_mul_bf16(const bf16* x, const bf16* w_blocked_folded, const bf16* b_blocked,
                              bf16* y, int64_t rows, int64_t k, int64_t inter, int64_t ld_y,
                              float eps, cudaStream_t stream, int splits, int tile_n) {
  ENCODER_KIT_REQUIRE(rows >= 0 && inter > 0 && inter % 8 == 0 && ld_y >= inter);
  ENCODER_KIT_REQUIRE(b_blocked != nullptr && eps >= 0.0f && std::isfinite(eps));
  ENCODER_KIT_REQUIRE(tile_n_ok(tile_n) && splits_ok(splits));
  ENCODER_KIT_REQUIRE(operands_ok(x, w_blocked_folded, b_blocked, y, k, ld_y));
  if (rows == 0) return 0;
  return launch<Fused::SiluMul>(x, w_blocked_folded, gate_up_blocked_rows(inter), b_blocked,
                                nullptr, y, rows, k, inter, ld_y, splits, stream, eps, tile_n);
}

bool rms_linear_supported() {
  return detail::sm90_gemm_supported();
}

int rms_linear_bf16(const bf16* x, const bf16* w_folded, const bf16* bias, bf16* y, int64_t rows,
                    int64_t n, int64_t k, float eps, cudaStream_t stream, int splits) {
  ENCODER_KIT_REQUIRE(rows >= 0 && n > 0 && n % 8 == 0);
  ENCODER_KIT_REQUIRE(eps >= 0.0f && std::isfinite(eps) && splits_ok(splits));
  ENCODER_KIT_REQUIRE(operands_ok(x, w_folded, bias, y, k, n));
  if (rows == 0) return 0;
  return launch<Fused::Bias>(x, w_folded, n, bias, nullptr, y, rows, k, n, n, splits, stream, eps);
}

}  // namespace encoder_kit::cuda
