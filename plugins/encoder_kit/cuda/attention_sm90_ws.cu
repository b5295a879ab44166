// Variable-length attention on Hopper with warp specialisation (sm_90a), the
// structure of FlashAttention-3 on cp.async instead of TMA:
//  - a block is three warpgroups: a producer that only copies (Q once, then
//    K and V tiles into a ring of kStages buffers) and two consumers of 64
//    query rows each that only multiply and run the softmax. The math warps
//    do no address arithmetic and never wait at a block-wide barrier;
//  - the hand-off is by mbarriers: the producer arrives on a tile's "full"
//    barrier once its copies have landed, the consumers arrive on its
//    "empty" barrier when their products have read it;
//  - registers move to the consumers (setmaxnreg): they keep Q as wgmma A
//    fragments (S = Q K^T reads only K from shared memory) and, with
//    kOverlap, the previous tile's P while its P V runs (tile j's Q K^T and
//    tile j-1's P V are issued together; tile j's softmax overlaps that P V);
//  - ping-pong: the two consumers take turns at issuing their products (two
//    named barriers), so that one runs its softmax while the other's products
//    occupy the tensor cores.
// Same contract, tile layout and online softmax as attention_sm90.cu
// (attention_sm90_common.cuh).
#include "attention_sm90_ws.hpp"

#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace encoder_kit::cuda {
namespace {

using namespace ptx;
using namespace sm90;

constexpr int kProducerRegisters = 56;
constexpr int kConsumerRegisters = 224;  // 128 * 56 + 256 * 224 <= 65536
constexpr int kBarrierBytes = 128;       // the mbarriers, before the tiles

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Waits until the phase of the given parity has completed. A fresh barrier is
// in phase 0, so waiting for parity 1 returns at once (the producer's first
// pass over the empty buffers).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int kDPad, int kBlockN, int kStages>
constexpr size_t ws_smem_bytes() {
  return kBarrierBytes + static_cast<size_t>(128 + 2 * kStages * kBlockN) * kDPad * sizeof(bf16);
}

template <int kDPad, int kBlockN, int kStages, bool kOverlap>
__global__ void __launch_bounds__(384, 1)
    ws_attention_kernel(const bf16* __restrict__ qkv, const int32_t* __restrict__ cu_seqlens,
                        int m_blocks, int num_heads, int head_dim, float scale_log2,
                        bf16* __restrict__ out) {
#if ENCODER_KIT_HAS_WGMMA
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  constexpr int kBlockM = 128;
  constexpr int kChunks = kDPad / 8;  // 16-byte chunks (core-matrix columns) per row
  constexpr uint32_t kGroupBytes = 16 * kDPad;
  constexpr int kKSteps = kDPad / 16;
  constexpr int kPSteps = kBlockN / 16;
  constexpr uint32_t kTileBytes = kBlockN * kDPad * 2;
  static_assert((1 + 3 * kStages) * 8 <= kBarrierBytes, "barriers overflow their space");

  const int seq = static_cast<int>(blockIdx.x) / m_blocks;
  const int q0 = (static_cast<int>(blockIdx.x) - seq * m_blocks) * kBlockM;
  const int head = static_cast<int>(blockIdx.y);
  const int start = cu_seqlens[seq];
  const int len = cu_seqlens[seq + 1] - start;
  if (q0 >= len) return;  // padded sequence or past its end: the whole block leaves
  const int n_tiles = (len + kBlockN - 1) / kBlockN;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t bars = smem_addr(smem_raw);
  const uint32_t q_full = bars;
  auto k_full = [&](int stage) { return bars + 8u * (1 + stage); };
  auto v_full = [&](int stage) { return bars + 8u * (1 + kStages + stage); };
  auto empty = [&](int stage) { return bars + 8u * (1 + 2 * kStages + stage); };
  const uint32_t s_q = bars + kBarrierBytes;
  const uint32_t s_k = s_q + kBlockM * kDPad * 2;  // [kStages][kBlockN][kDPad]
  const uint32_t s_v = s_k + kStages * kTileBytes;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 128);  // every producer thread, once its copies landed
    for (int stage = 0; stage < kStages; ++stage) {
      mbar_init(k_full(stage), 128);
      mbar_init(v_full(stage), 128);
      mbar_init(empty(stage), 8);  // lane 0 of each consumer warp
    }
  }
  __syncthreads();  // the only block-wide barrier: the mbarriers exist

  // Warp-uniform in the compiler's eyes (a shuffle from lane 0): a warpgroup
  // index it cannot prove uniform makes every wgmma of the consumer path
  // "divergent", and ptxas serialises them.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (wg == 0) {
    // Producer. Eight consecutive threads fill one core matrix's eight rows
    // (one conflict-free shared wavefront), as in attention_sm90.cu.
    setmaxnreg_dec<kProducerRegisters>();
    const int64_t row_stride = int64_t{3} * num_heads * head_dim;
    const bf16* q_base =
        qkv + static_cast<int64_t>(start) * row_stride + static_cast<int64_t>(head) * head_dim;
    const bf16* k_base = q_base + static_cast<int64_t>(num_heads) * head_dim;
    const bf16* v_base = k_base + static_cast<int64_t>(num_heads) * head_dim;
    const int valid_chunks = head_dim / 8;
    auto load_tile = [&](uint32_t dst, const bf16* base, int row0, int rows) {
      for (int i = threadIdx.x; i < rows * kChunks; i += 128) {
        const int rest = i >> 3;
        const int c = rest % kChunks;
        const int r = (rest / kChunks) * 8 + (i & 7);
        const bool ok = row0 + r < len && c < valid_chunks;
        const bf16* src = ok ? base + static_cast<int64_t>(row0 + r) * row_stride + c * 8 : base;
        cp_async16(dst + (r >> 3) * kGroupBytes + c * 128 + (r & 7) * 16, src, ok);
      }
    };
    // A tile is published once its copies have landed: wait for them, fence
    // them from the generic proxy (cp.async) to the async one (wgmma), then
    // arrive. (cp.async.mbarrier.arrive would signal on landing, but leaves no
    // point for the writer's proxy fence: wgmma then read stale tiles.)
    auto publish = [](uint32_t bar) {
      fence_async_shared();
      mbar_arrive(bar);
    };
    load_tile(s_q, q_base, q0, kBlockM);
    cp_async_commit();
    for (int it = 0; it < n_tiles; ++it) {
      const int stage = it % kStages;
      mbar_wait(empty(stage), ((it / kStages) & 1) ^ 1);
      load_tile(s_k + stage * kTileBytes, k_base, it * kBlockN, kBlockN);
      cp_async_commit();
      load_tile(s_v + stage * kTileBytes, v_base, it * kBlockN, kBlockN);
      cp_async_commit();
      if (it == 0) {
        cp_async_wait<2>();
        publish(q_full);
      }
      cp_async_wait<1>();
      publish(k_full(stage));
      cp_async_wait<0>();
      publish(v_full(stage));
    }
    return;
  }

  // Consumers 0 and 1 (warpgroups 1 and 2): 64 query rows each.
  setmaxnreg_inc<kConsumerRegisters>();
  const int c = wg - 1;
  const int lane = threadIdx.x % 32;
  const int warp = (threadIdx.x % 128) / 32;  // within the warpgroup
  const int t = lane & 3;
  // Q as A fragments: warp w holds rows 16w..16w+15 of this consumer's 64;
  // ldmatrix.x4 reads the four 8x8 core matrices of one k16 step (rows +0/+8,
  // columns +0/+8), lanes 8i..8i+7 addressing matrix i's rows.
  uint32_t q[kKSteps][4];
  mbar_wait(q_full, 0);
  {
    const int i = lane >> 3;
    const int row = c * 64 + warp * 16 + (i & 1) * 8 + (lane & 7);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
      ldmatrix_x4(q[kk], s_q + (row >> 3) * kGroupBytes + (2 * kk + (i >> 1)) * 128 +
                             (row & 7) * 16);
  }

  float o[kDPad / 2];
#pragma unroll
  for (int i = 0; i < kDPad / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g+8, log2 domain
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial sums
  // Ping-pong. Named barrier 1 + c is consumer c's turn at the tensor cores
  // (0 is __syncthreads); both consumers take part in each, 256 threads.
  // Consumer 0 goes first: consumer 1 opens its turn. A consumer opens the
  // other's turn after each issue, except consumer 1 after its last (no turn
  // of consumer 0 is left to open).
  constexpr int kTurnThreads = 256;
  auto my_turn = [&] { named_barrier_sync(1 + c, kTurnThreads); };
  auto their_turn = [&](bool last) {
    if (!(c == 1 && last)) named_barrier_arrive(2 - c, kTurnThreads);
  };
  if (c == 1) named_barrier_arrive(1, kTurnThreads);
  // Descriptors are computed and pinned before the wgmma.fence: an input
  // register of a wgmma defined after it serialises the products (ptxas C7513).
  auto qk_descs = [&](uint64_t(&d)[kKSteps], int stage) {
    const uint32_t k = s_k + stage * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      d[kk] = smem_desc(k + kk * 256, 128, kGroupBytes);
      asm volatile("" : "+l"(d[kk]));
    }
  };
  auto pv_descs = [&](uint64_t(&d)[kPSteps], int stage) {
    const uint32_t v = s_v + stage * kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {
      d[kk] = smem_desc(v + kk * 2 * kGroupBytes, kGroupBytes, 128);
      asm volatile("" : "+l"(d[kk]));
    }
  };
  auto issue_qk = [&](float(&s)[kBlockN / 2], const uint64_t(&d)[kKSteps]) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) qk_step<kBlockN>(s, q[kk], d[kk]);
  };
  auto issue_pv = [&](const uint32_t(&p)[kPSteps][4], const uint64_t(&d)[kPSteps]) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) pv_step<kDPad>(o, p[kk], d[kk]);
  };
  auto release = [&](int stage) {
    if (lane == 0) mbar_arrive(empty(stage));
  };
  auto full_parity = [](int it) { return static_cast<uint32_t>((it / kStages) & 1); };

  if constexpr (!kOverlap) {
    // Per tile: S = Q K^T, softmax, O += P V, one after the other; the other
    // consumer's products fill the tensor cores during this one's softmax.
    for (int it = 0; it < n_tiles; ++it) {
      const int stage = it % kStages;
      mbar_wait(k_full(stage), full_parity(it));
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      uint64_t dk[kKSteps];
      qk_descs(dk, stage);
      my_turn();
      wgmma_fence();
      issue_qk(s, dk);
      wgmma_commit();
      their_turn(false);
      wgmma_wait<0>();
      fence_registers(s);
      uint32_t p[kPSteps][4];
      float alpha[2];
      online_softmax<kBlockN>(s, it * kBlockN, len, scale_log2, t, row_max, row_sum, p, alpha);
      rescale_o<kDPad>(o, alpha);
      mbar_wait(v_full(stage), full_parity(it));
      fence_registers(o);
      fence_registers(p);
      uint64_t dv[kPSteps];
      pv_descs(dv, stage);
      my_turn();
      wgmma_fence();
      issue_pv(p, dv);
      wgmma_commit();
      their_turn(it + 1 == n_tiles);
      wgmma_wait<0>();
      fence_registers(o);
      fence_registers(p);
      release(stage);
    }
  } else {
    uint32_t p_prev[kPSteps][4];
    {  // tile 0: no P V to overlap with yet; O is zero, nothing to rescale
      mbar_wait(k_full(0), 0);
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      uint64_t dk[kKSteps];
      qk_descs(dk, 0);
      my_turn();
      wgmma_fence();
      issue_qk(s, dk);
      wgmma_commit();
      their_turn(n_tiles == 1);
      wgmma_wait<0>();
      fence_registers(s);
      float alpha[2];
      online_softmax<kBlockN>(s, 0, len, scale_log2, t, row_max, row_sum, p_prev, alpha);
    }
    for (int it = 1; it < n_tiles; ++it) {
      const int stage = it % kStages;
      const int prev = (it - 1) % kStages;
      mbar_wait(k_full(stage), full_parity(it));
      mbar_wait(v_full(prev), full_parity(it - 1));
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      fence_registers(o);  // rescaled in the previous iteration
      fence_registers(p_prev);
      uint64_t dk[kKSteps], dv[kPSteps];
      qk_descs(dk, stage);
      pv_descs(dv, prev);
      my_turn();
      wgmma_fence();
      issue_qk(s, dk);
      wgmma_commit();
      issue_pv(p_prev, dv);
      wgmma_commit();
      their_turn(it + 1 == n_tiles);
      wgmma_wait<1>();  // S landed; P V may still run
      fence_registers(s);
      uint32_t p[kPSteps][4];
      float alpha[2];
      online_softmax<kBlockN>(s, it * kBlockN, len, scale_log2, t, row_max, row_sum, p, alpha);
      wgmma_wait<0>();
      // P V has landed: only now may O change, and p_prev's registers be
      // reused (the fence keeps p in registers of its own until here).
      fence_registers(o);
      fence_registers(p_prev);
      release(prev);
      rescale_o<kDPad>(o, alpha);
#pragma unroll
      for (int kk = 0; kk < kPSteps; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) p_prev[kk][x] = p[kk][x];
    }
    {  // P V of the last tile, outside the turns
      const int last = (n_tiles - 1) % kStages;
      mbar_wait(v_full(last), full_parity(n_tiles - 1));
      fence_registers(o);
      fence_registers(p_prev);
      uint64_t dv[kPSteps];
      pv_descs(dv, last);
      wgmma_fence();
      issue_pv(p_prev, dv);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(o);
    }
  }

  const int row_g = q0 + c * 64 + warp * 16 + (lane >> 2);
  write_rows<kDPad>(o, row_sum, row_g, t, len, start, head, num_heads, head_dim, out);
#else
  (void)qkv, (void)cu_seqlens, (void)m_blocks, (void)num_heads, (void)head_dim, (void)scale_log2,
      (void)out;
  __trap();
#endif
}

template <int kDPad, int kBlockN, int kStages, bool kOverlap>
int launch(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs, int max_seqlen, int num_heads,
           int head_dim, float scale, bf16* out, cudaStream_t stream) {
  constexpr size_t kSmem = ws_smem_bytes<kDPad, kBlockN, kStages>();
  auto* kernel = ws_attention_kernel<kDPad, kBlockN, kStages, kOverlap>;
  const int opt_in = detail::opt_in_dynamic_smem(kernel, kSmem);
  if (opt_in != 0) return opt_in;
  const int m_blocks = (max_seqlen + 127) / 128;
  ENCODER_KIT_REQUIRE(static_cast<int64_t>(max_seqs) * m_blocks <= int64_t{0x7fffffff});
  const dim3 grid(static_cast<unsigned>(max_seqs * m_blocks), static_cast<unsigned>(num_heads));
  return detail::launch_kernel(kernel, grid, dim3(384), kSmem, stream, qkv, cu_seqlens, m_blocks,
                               num_heads, head_dim, scale * 1.4426950408889634f, out);
}

}  // namespace

namespace detail {

const char* sm90_ws_attention_config_name(int config) {
  switch (config) {
    case 0: return "wgmma, producer warpgroup, ping-pong, 128-key tiles, overlapped";
    case 1: return "wgmma, producer warpgroup, ping-pong, 64-key tiles, overlapped";
    case 2: return "wgmma, producer warpgroup, ping-pong, 128-key tiles, in turn";
    case 3: return "wgmma, producer warpgroup, ping-pong, 64-key tiles, in turn";
    default: return "?";
  }
}

int varlen_attention_bf16_sm90_ws(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                  int max_seqlen, int num_heads, int head_dim, float scale,
                                  bf16* out, int config, cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(config >= 0 && config < kSm90WsAttentionConfigs);
  auto go = [&](auto dpad) {
    constexpr int d = decltype(dpad)::value;
    auto run = [&](auto kernel_launch) {
      return kernel_launch(qkv, cu_seqlens, max_seqs, max_seqlen, num_heads, head_dim, scale, out,
                           stream);
    };
    switch (config) {
      case 0: return run(launch<d, 128, 2, true>);
      case 1: return run(launch<d, 64, 2, true>);
      case 2: return run(launch<d, 128, 2, false>);
      default: return run(launch<d, 64, 2, false>);
    }
  };
  if (head_dim <= 64) return go(std::integral_constant<int, 64>{});
  if (head_dim <= 80) return go(std::integral_constant<int, 80>{});
  if (head_dim <= 96) return go(std::integral_constant<int, 96>{});
  return go(std::integral_constant<int, 128>{});
}

}  // namespace detail
}  // namespace encoder_kit::cuda
