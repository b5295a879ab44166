// A transformer block's MLP in one launch on Hopper (sm_90a), for few rows
// (one to a few small images): x += down(silu(gate(n(x))) * up(n(x))) with n
// the RMSNorm, gate and up blocked as gate_up_silu_mul_bf16 reads them.
//
// Why: at 256 rows each product is one tile's k loop a multiprocessor plus a
// launch, a pipeline fill and a drain (bench/kernels/NOTES.md, "One image's
// kernels today"); the down product has only 20 tiles of 128 x 128 for 132
// multiprocessors and a k of 3456, so cuBLASLt runs 64 x 64 tiles with the
// whole k each. Here one persistent block a multiprocessor runs two stages
// without a launch between them:
//  1. norm2 + gate/up + SiLU·mul, 128 x 128 tiles (64 features each) exactly
//     as rms_gate_up_silu_mul_bf16 computes them, stored to act by TMA. Each
//     finished tile counts itself in ready[row tile][split] (release).
//  2. down + bias + residual over k split `splits` ways: item (tile, split)
//     multiplies act's k-blocks of its split (the features of stage-1 tiles,
//     one k-block a tile) once ready[row tile][split] says they are all in
//     place (acquire). The copier loads the item's first stages of W before
//     that wait, so W's reads leave the path between the stages. The items of
//     a tile leave fp32 partials in the workspace, count themselves in
//     done[tile], wait for each other, and each then sums the partials of its
//     share of the tile's columns in split order (deterministic), adds bias
//     and residual, and writes x. With one split the item writes x directly.
// Every block does all its stage-1 tiles before any stage-2 item, and stage 1
// never waits, so the waits cannot deadlock once every block is resident: the
// grid is at most one block a multiprocessor (1 fits), and with more than one
// split every block has at most one stage-2 item (items ≤ grid), since two
// items a block could wait on each other's tiles. The counters start at zero
// (the caller's memset; the kernel's last block leaves them zero again).
//
// x is read (stage 1) and written (stage 2) in place: a row tile's x is
// written only after its items have seen every stage-1 tile of those rows
// finished, and a stage-1 tile counts itself only after its products (its
// reads of x) and its store are complete.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "gemm_sm90_tile.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"
#include "tensor_map.hpp"
#include "tma_sm90.cuh"

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace encoder_kit::cuda {
namespace {

using namespace ptx;
using namespace sm90;
using namespace gemm_tile;

constexpr int kTileN = 128;  // both stages: 128 x 128 tiles (stage 1: 64 features)
constexpr int kStages = 6;
constexpr uint32_t kWBytes = kTileN * kBK * 2;  // 16 KiB a stage
constexpr int kMaxSplits = 8;
constexpr size_t kSmem = 1024 /* alignment slack */ + kStages * (kABytes + kWBytes) +
                         kSubTileBytes /* stage 1's output box */ + 2 * kStages * sizeof(uint64_t);
static_assert(kSmem <= 227 * 1024);
static_assert(kGateUpBlock % 64 == 0, "a stage-1 tile's 64 features lie in one gate/up block");
constexpr float4* kNoPartials = nullptr;

struct MlpArgs {
  const bf16* gate_up_b;  // blocked, gate_up_rows long
  const bf16* down_b;     // d
  bf16* x;                // [rows, d]: the residual in, the block's output out
  float4* partials;       // [splits][tiles2][128 x 128 fp32 in fragment order]
  unsigned* counters;     // ready[m_tiles][splits], done[tiles2], exits
  int64_t gate_up_rows;
  int rows, d, k1_blocks, n1, k2_blocks, m_tiles, n2, splits;
  float eps;
  unsigned long long* trace;  // detail::rms_mlp_set_trace: kTraceStamps a block, or null
  int variant;                // detail::rms_mlp_set_variant's experiment bits (0: none)
};
int g_variant = 0;
constexpr int kTraceStamps = 6;
unsigned long long* g_trace = nullptr;

// k-blocks [lo, hi) of k2 blocks for split s of `splits`.
__device__ __forceinline__ int split_lo(int s, int k2, int splits) {
  return s * k2 / splits;
}
__device__ __forceinline__ int split_of(int kb, int k2, int splits) {
  int s = 0;
  while (s + 1 < splits && split_lo(s + 1, k2, splits) <= kb) ++s;
  return s;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Until *p >= target (other blocks' releases), then acquire: relaxed loads
// while spinning (an acquire load also invalidates this multiprocessor's L1
// each time), one fence after. A wait of seconds means a block never arrived
// (not resident: something else holds a multiprocessor for good): trap, so
// that the launch fails instead of hanging the stream.
__device__ __forceinline__ void wait_count(const unsigned* p, unsigned target,
                                           unsigned sleep_ns = 0) {
  const uint64_t start = global_ns();
  while (load_relaxed(p) < target) {
    __nanosleep(sleep_ns);
    if (global_ns() - start > 4000000000ull) __trap();
  }
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}
// *p += 1 after this thread's (and, through a preceding block barrier, its
// block's) writes.
__device__ __forceinline__ void count_release(unsigned* p) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory");
}
// Profiling stamps (detail::rms_mlp_set_trace): the global timer at point i of
// this block's run.
__device__ __forceinline__ void stamp(const MlpArgs& g, int i) {
  if (g.trace != nullptr) g.trace[blockIdx.x * kTraceStamps + i] = global_ns();
}
// Orders this thread's async-proxy (TMA) global accesses before or after its
// generic ones: a store by TMA before the release that announces it, and
// the TMA loads after the acquire that allowed them.
__device__ __forceinline__ void fence_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

__global__ void __launch_bounds__(384, 1)
    mlp_sm90_kernel(const __grid_constant__ CUtensorMap map_x,
                    const __grid_constant__ CUtensorMap map_gate_up,
                    const __grid_constant__ CUtensorMap map_act,
                    const __grid_constant__ CUtensorMap map_down, const MlpArgs g) {
#if ENCODER_KIT_HAS_WGMMA
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;  // 128-byte swizzle atoms
  const uint32_t s_a = base;
  const uint32_t s_w = base + kStages * kABytes;
  const uint32_t s_out = s_w + kStages * kWBytes;
  const uint32_t full = s_out + kSubTileBytes;  // kStages mbarriers, then kStages "empty"
  const uint32_t empty = full + kStages * 8;
  const int wg = static_cast<int>(threadIdx.x) / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full + 8 * s, 1);   // the copier's expect_tx arrival (+ the bytes)
      mbarrier_init(empty + 8 * s, 8);  // one arrival per multiplying warp
    }
    fence_barrier_init();
  }
  __syncthreads();
  detail::wait_for_prior_grid();  // x is the previous kernel's output (launch.cuh)
  if (threadIdx.x == 128) stamp(g, 0);

  const int grid = static_cast<int>(gridDim.x), block = static_cast<int>(blockIdx.x);
  const int tiles1 = g.m_tiles * g.n1, tiles2 = g.m_tiles * g.n2;
  const int items2 = tiles2 * g.splits;
  // Stage-2 items start at the blocks with one stage-1 tile fewer.
  const int first2 = ((block - tiles1) % grid + grid) % grid;
  unsigned* const ready = g.counters;
  unsigned* const done = ready + g.m_tiles * g.splits;
  unsigned* const exits = done + tiles2;

  if (wg == 0) {
    release_registers<40>();
    if (threadIdx.x == 0) {
      int it = 0;                // k-blocks issued so far
      auto claim = [&](int i) {  // stage i of the ring for k-block it + i, bytes announced
        const int q = it + i, s = q % kStages;
        if (q >= kStages) mbarrier_wait(empty + 8 * s, ((q / kStages) - 1) & 1);
        mbarrier_arrive_expect_tx(full + 8 * s, kABytes + kWBytes);
        return s;
      };
      for (int t = block; t < tiles1; t += grid) {
        const int m0 = (t / g.n1) * kBM, f = t % g.n1;
        for (int kb = 0; kb < g.k1_blocks; ++kb, ++it) {
          const int s = claim(0);
          tma_load_2d(s_a + s * kABytes, &map_x, kb * kBK, m0, full + 8 * s);
          for (int h = 0; h < 2; ++h)  // the gate rows, then the up rows
            tma_load_2d(s_w + s * kWBytes + h * (kWBytes / 2), &map_gate_up, kb * kBK,
                        static_cast<int>(w_row<Fused::SiluMul, kTileN>(f, h * kTileN / 2)),
                        full + 8 * s);
        }
      }
      for (int i = first2; i < items2 && !(g.variant & 2); i += grid) {
        const int split = i % g.splits, tile = i / g.splits;
        const int mt = tile / g.n2, n0 = (tile % g.n2) * kTileN;
        const int lo = split_lo(split, g.k2_blocks, g.splits);
        const int n = split_lo(split + 1, g.k2_blocks, g.splits) - lo;
        const int early = (g.variant & 1) ? 0
                          : n < kStages   ? n
                                          : kStages;  // W's stages loaded before the wait
        for (int j = 0; j < early; ++j) {
          const int s = claim(j);
          tma_load_2d(s_w + s * kWBytes, &map_down, (lo + j) * kBK, n0, full + 8 * s);
        }
        wait_count(ready + mt * g.splits + split, static_cast<unsigned>(n),
                   (g.variant & 4) ? 256u : 0u);
        fence_async_global();
        stamp(g, 2);
        for (int j = 0; j < n; ++j) {
          int s = (it + j) % kStages;
          if (j >= early) {
            s = claim(j);
            tma_load_2d(s_w + s * kWBytes, &map_down, (lo + j) * kBK, n0, full + 8 * s);
          }
          tma_load_2d(s_a + s * kABytes, &map_act, (lo + j) * kBK, mt * kBM, full + 8 * s);
        }
        it += n;
      }
    }
    return;
  }

  claim_registers<232>();
  const int c = wg - 1;  // rows 64c .. 64c + 63 of each tile
  const int warp = (static_cast<int>(threadIdx.x) / 32) % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int t = lane % 4;
  const int tid = static_cast<int>(threadIdx.x) - 128;
  const bool leader = threadIdx.x == 128;          // stores, counts, waits
  const int row0 = 64 * c + 16 * warp + lane / 4;  // this thread's first row in a tile
  float acc[kTileN / 2];
  int it = 0;  // k-blocks consumed so far

  // Stage 1: norm2 + gate/up + SiLU·mul.
  for (int t1 = block; t1 < tiles1; t1 += grid) {
    const int mt = t1 / g.n1, f = t1 % g.n1, m0 = mt * kBM;
    float squares[2] = {0.0f, 0.0f};
    uint32_t frag[kBK / 16][4];
    for (int kb = 0; kb < g.k1_blocks; ++kb, ++it) {
      const int s = it % kStages;
      mbarrier_wait(full + 8 * s, (it / kStages) & 1);
      k_block_norm<kTileN>(acc, frag, squares, s_a + s * kABytes + c * (64 * 128),
                           s_w + s * kWBytes, warp, lane, kb == 0, kb > 0,
                           empty + 8 * ((it + kStages - 1) % kStages));
    }
    uint32_t bias_pairs[kTileN / 8];
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      const int64_t n = w_row<Fused::SiluMul, kTileN>(f, 8 * j + 2 * t);
      bias_pairs[j] = n < g.gate_up_rows ? ld_global_nc_u32(g.gate_up_b + n) : 0u;
    }
    wgmma_wait<0>();
    fence_registers(acc);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty + 8 * ((it - 1) % kStages));
    for (float& v : squares) {
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
    }
    const float s0 = rsqrtf(squares[0] / static_cast<float>(g.d) + g.eps);
    const float s1 = rsqrtf(squares[1] / static_cast<float>(g.d) + g.eps);
#pragma unroll
    for (int i = 0; i < kTileN / 2; ++i) acc[i] *= (i & 2) ? s1 : s0;
    sync_multipliers();  // the previous tile's store has read the box (the leader waited)
    stage_rows<Fused::SiluMul, kTileN>(acc, bias_pairs, s_out,
                                       static_cast<uint32_t>(row0) * 128 + 4 * t, lane / 4, 0);
    fence_async_shared();  // generic-proxy writes, read by the TMA unit
    sync_multipliers();
    if (leader) {
      tma_store_2d(&map_act, s_out, f * 64, m0);
      bulk_commit();
      bulk_wait<0>();  // written, not only read: the count announces it
      fence_async_global();
      count_release(ready + mt * g.splits + split_of(f, g.k2_blocks, g.splits));
    }
  }

  if (leader) stamp(g, 1);
  if (g.variant & 2) return;  // stage 1 alone (an experiment: x is left as it was)

  // Stage 2: down + bias + residual.
  for (int i = first2; i < items2; i += grid) {
    const int split = i % g.splits, tile = i / g.splits;
    const int m0 = (tile / g.n2) * kBM, n0 = (tile % g.n2) * kTileN;
    const int lo = split_lo(split, g.k2_blocks, g.splits);
    const int hi = split_lo(split + 1, g.k2_blocks, g.splits);
    for (int kb = lo; kb < hi; ++kb, ++it) {
      const int s = it % kStages;
      mbarrier_wait(full + 8 * s, (it / kStages) & 1);
      k_block_ss<kTileN>(acc, s_a + s * kABytes + c * (64 * 128), s_w + s * kWBytes, kb == lo);
      wgmma_wait<1>();  // the previous k-block's products have read their stage
      if (kb > lo) {
        __syncwarp();
        if (lane == 0) mbarrier_arrive(empty + 8 * ((it + kStages - 1) % kStages));
      }
    }
    wgmma_wait<0>();
    fence_registers(acc);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty + 8 * ((it + kStages - 1) % kStages));
    if (leader) stamp(g, 3);

    // out = sum + bias + residual for output groups [g_lo, g_hi) of the tile
    // (columns 8j + 2t, + 1; rows row0, row0 + 8), sum(j) giving the float4
    // of those four values. Every load first, then every store: x's loads and
    // stores go through one pointer, so stores between them would make each
    // load wait for the one before it (a round trip to L2 per group).
    auto finish = [&](int g_lo, int g_hi, auto sum) {
      constexpr int kGroups = kTileN / 8;
      uint32_t res[kGroups][2], bias[kGroups];
      float4 v[kGroups];
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        const int col = n0 + 8 * j + 2 * t;
        const bool live = j >= g_lo && j < g_hi && col < g.d;
        bias[j] = live ? ld_global_nc_u32(g.down_b + col) : 0u;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + row0 + 8 * h;
          res[j][h] =
              live && row < g.rows
                  ? *reinterpret_cast<const uint32_t*>(g.x + static_cast<int64_t>(row) * g.d + col)
                  : 0u;
        }
        v[j] = live ? sum(j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        const int col = n0 + 8 * j + 2 * t;
        if (j < g_lo || j >= g_hi || col >= g.d) continue;
        const float2 b = unpack_bf16x2(bias[j]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + row0 + 8 * h;
          if (row >= g.rows) continue;
          const float2 r = unpack_bf16x2(res[j][h]);
          *reinterpret_cast<uint32_t*>(g.x + static_cast<int64_t>(row) * g.d + col) =
              h == 0 ? pack_bf16(v[j].x + b.x + r.x, v[j].y + b.y + r.y)
                     : pack_bf16(v[j].z + b.x + r.x, v[j].w + b.y + r.y);
        }
      }
    };
    if (g.splits == 1) {
      finish(0, kTileN / 8, [&](int j) {
        return make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
      });
      continue;
    }
    // The partial in fragment order: thread-fastest float4s, coalesced.
    float4* const mine =
        g.partials + (static_cast<int64_t>(split) * tiles2 + tile) * (kBM * kTileN / 4);
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j)
      mine[j * 256 + tid] = make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
    sync_multipliers();  // the block's partial, released below by its leader
    if (leader) {
      count_release(done + tile);
      wait_count(done + tile, static_cast<unsigned>(g.splits));
      stamp(g, 4);
    }
    sync_multipliers();
    const float4* const parts = g.partials + static_cast<int64_t>(tile) * (kBM * kTileN / 4) + tid;
    const int64_t split_stride = static_cast<int64_t>(tiles2) * (kBM * kTileN / 4);
    finish(split * (kTileN / 8) / g.splits, (split + 1) * (kTileN / 8) / g.splits, [&](int j) {
      float4 v = __ldcg(parts + j * 256);
#pragma unroll
      for (int q = 1; q < kMaxSplits; ++q)
        if (q < g.splits) {  // in split order: the same bits every run
          const float4 p = __ldcg(parts + q * split_stride + j * 256);
          v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
        }
      return v;
    });
  }

  // The last block to finish leaves the counters at zero for the next call:
  // every other block has passed all its waits by then.
  sync_multipliers();
  if (leader) {
    stamp(g, 5);
    __threadfence();
    if (atomicAdd(exits, 1u) == static_cast<unsigned>(grid) - 1) {
      const int n = g.m_tiles * g.splits + tiles2 + 1;
      for (int q = 0; q < n; ++q) g.counters[q] = 0;
      __threadfence();
    }
  }
#else
  (void)map_x, (void)map_gate_up, (void)map_act, (void)map_down, (void)g;
  __trap();
#endif
}

// A row-major bf16 matrix of rows x cols (row stride ld), moved in boxes of
// box_rows x 64 columns, 128-byte swizzled (as gemm_sm90.cu's products).
int encode_boxes(CUtensorMap* map, const bf16* data, int64_t rows, int64_t cols, int64_t ld,
                 int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * sizeof(bf16)};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  return detail::encode_bf16_tiled(map, data, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

struct MlpShape {
  int m_tiles, n1, n2, k1_blocks, k2_blocks, splits, grid;
};

// The tiles and the split of the down product for `rows` on `sms`
// multiprocessors: the most splits (up to 8, at least two k-blocks each) that
// keep every item in one wave; 1 when the down tiles fill the GPU alone.
MlpShape mlp_shape(int64_t rows, int64_t d, int64_t inter, int sms) {
  MlpShape sh{};
  sh.m_tiles = static_cast<int>((rows + kBM - 1) / kBM);
  sh.n1 = static_cast<int>(inter / 64);
  sh.n2 = static_cast<int>((d + kTileN - 1) / kTileN);
  sh.k1_blocks = static_cast<int>((d + kBK - 1) / kBK);
  sh.k2_blocks = sh.n1;
  const int tiles2 = sh.m_tiles * sh.n2;
  sh.splits = 1;
  for (int s = kMaxSplits; s > 1; --s)
    if (tiles2 * s <= sms && sh.k2_blocks >= 2 * s) {
      sh.splits = s;
      break;
    }
  sh.grid = std::min(sms, std::max(sh.m_tiles * sh.n1, tiles2 * sh.splits));
  return sh;
}

// The current device's shape for these sizes; false when the device is unknown.
bool current_shape(int64_t rows, int64_t d, int64_t inter, MlpShape& sh) {
  int device = 0, sms = 0;
  if (rows <= 0 || d <= 0 || inter <= 0 || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      sms <= 0) {
    (void)cudaGetLastError();
    return false;
  }
  sh = mlp_shape(rows, d, inter, sms);
  return true;
}
// The workspace: the down product's partials (with more than one split),
// then the counters (256-byte aligned).
size_t partial_bytes(const MlpShape& sh) {
  return sh.splits > 1 ? static_cast<size_t>(sh.splits) * static_cast<size_t>(sh.m_tiles) *
                             static_cast<size_t>(sh.n2) * kBM * kTileN * sizeof(float)
                       : 0;
}
size_t counter_bytes(const MlpShape& sh) {
  const size_t n = static_cast<size_t>(sh.m_tiles) * static_cast<size_t>(sh.splits) +
                   static_cast<size_t>(sh.m_tiles) * static_cast<size_t>(sh.n2) + 1;
  return (n * sizeof(unsigned) + 255) / 256 * 256;
}

}  // namespace

namespace detail {
void rms_mlp_set_trace(unsigned long long* stamps) {
  g_trace = stamps;
}
void rms_mlp_set_variant(int bits) {
  g_variant = bits;
}
int rms_mlp_trace_stamps() {
  return kTraceStamps;
}
}  // namespace detail

bool rms_mlp_supported() {
  return detail::sm90_gemm_supported();
}

size_t rms_mlp_workspace_bytes(int64_t rows, int64_t d, int64_t inter) {
  MlpShape sh{};
  if (!current_shape(rows, d, inter, sh)) return 0;
  return partial_bytes(sh) + counter_bytes(sh);
}

int rms_mlp_clear(void* workspace, int64_t rows, int64_t d, int64_t inter, cudaStream_t stream) {
  MlpShape sh{};
  ENCODER_KIT_REQUIRE(workspace != nullptr && current_shape(rows, d, inter, sh));
  ENCODER_KIT_CUDA_TRY(cudaMemsetAsync(static_cast<char*>(workspace) + partial_bytes(sh), 0,
                                       counter_bytes(sh), stream));
  return 0;
}

int rms_mlp_bf16(bf16* x, const bf16* w_gate_up, const bf16* b_gate_up, const bf16* w_down,
                 const bf16* b_down, bf16* act, int64_t rows, int64_t d, int64_t inter, float eps,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && d > 0 && d % 8 == 0 && d <= 0x7fffffff);
  ENCODER_KIT_REQUIRE(inter > 0 && inter % kGateUpBlock == 0 && inter <= 0x7fffffff);
  ENCODER_KIT_REQUIRE(eps >= 0.0f && std::isfinite(eps));
  ENCODER_KIT_REQUIRE(x != nullptr && w_gate_up != nullptr && b_gate_up != nullptr &&
                      w_down != nullptr && b_down != nullptr && act != nullptr);
  ENCODER_KIT_REQUIRE(detail::aligned16(x) && detail::aligned16(w_gate_up) &&
                      detail::aligned16(w_down) && detail::aligned16(act) &&
                      reinterpret_cast<uintptr_t>(b_gate_up) % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(b_down) % 4 == 0);
  ENCODER_KIT_REQUIRE(rows <= 0x7fffffff / 2);
  if (rows == 0) return 0;
  ENCODER_KIT_REQUIRE(rms_mlp_supported());
  MlpShape sh{};
  ENCODER_KIT_REQUIRE(current_shape(rows, d, inter, sh));
  ENCODER_KIT_REQUIRE(workspace != nullptr &&
                      workspace_bytes >= partial_bytes(sh) + counter_bytes(sh) &&
                      reinterpret_cast<uintptr_t>(workspace) % 256 == 0);
  const int64_t gate_up_rows = gate_up_blocked_rows(inter);
  CUtensorMap map_x{}, map_gate_up{}, map_act{}, map_down{};
  if (const int err = encode_boxes(&map_x, x, rows, d, d, kBM)) return err;
  if (const int err = encode_boxes(&map_gate_up, w_gate_up, gate_up_rows, d, d, kTileN / 2))
    return err;
  if (const int err = encode_boxes(&map_act, act, rows, inter, inter, kBM)) return err;
  if (const int err = encode_boxes(&map_down, w_down, d, inter, inter, kTileN)) return err;
  MlpArgs g{};
  g.gate_up_b = b_gate_up;
  g.down_b = b_down;
  g.x = x;
  g.partials = sh.splits > 1 ? static_cast<float4*>(workspace) : kNoPartials;
  g.counters = reinterpret_cast<unsigned*>(static_cast<char*>(workspace) + partial_bytes(sh));
  g.gate_up_rows = gate_up_rows;
  g.rows = static_cast<int>(rows);
  g.d = static_cast<int>(d);
  g.k1_blocks = sh.k1_blocks;
  g.n1 = sh.n1;
  g.k2_blocks = sh.k2_blocks;
  g.m_tiles = sh.m_tiles;
  g.n2 = sh.n2;
  g.splits = sh.splits;
  g.eps = eps;
  g.trace = g_trace;
  g.variant = g_variant;
  if (const int err = detail::opt_in_dynamic_smem(mlp_sm90_kernel, kSmem)) return err;
  return detail::launch_kernel(mlp_sm90_kernel, dim3(static_cast<unsigned>(sh.grid)), dim3(384),
                               kSmem, stream, map_x, map_gate_up, map_act, map_down, g);
}

}  // namespace encoder_kit::cuda
