// Variable-length attention on Hopper's warpgroup MMA (wgmma, sm_90a), for
// sequences longer than one 64-key tile (full-attention layers, SigLIP,
// Qwen3-VL). Same contract and same online softmax as attention.cu; what
// differs is who multiplies:
//  - a block is kWarpgroups warpgroups of 128 threads, each owning 64 query
//    rows; S = Q K^T is one chain of m64 x kBlockN x 16 wgmma steps with Q and
//    K read straight from shared memory, and O += P V takes P from registers
//    (the accumulator layout of S, rounded to bf16, is wgmma's A fragment
//    layout) and V from shared memory, N-major;
//  - tiles arrive by cp.async, double-buffered, K and V in separate groups;
//    the next tile's copies are issued while the current products run.
//
// Tile layout and the shared steps: attention_sm90_common.cuh.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

namespace encoder_kit::cuda {
namespace {

using namespace ptx;
using namespace sm90;

template <int kDPad, int kBlockN, int kWarpgroups>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(64 * kWarpgroups + 4 * kBlockN) * kDPad * sizeof(bf16);
}

// Two blocks a multiprocessor when the accumulators fit in 128 registers:
// 64-key tiles in turn, up to head_dim 96. The overlapped loop keeps two P
// tiles live (the one P V reads and the next): it spilled under that cap.
template <int kDPad, int kBlockN, int kWarpgroups, bool kOverlap>
constexpr int min_blocks() {
  return (kBlockN == 64 && kDPad <= 96 && kWarpgroups == 2 && !kOverlap) ? 2 : 1;
}

// kOverlap false (the default): per key tile, S = Q K^T, softmax, O += P V,
// one after the other (two barriers a tile). kOverlap true (FA3's
// intra-warpgroup pipelining): tile j's Q K^T and tile j-1's P V are issued
// together, and tile j's softmax runs on the ALUs while P V still occupies the
// tensor cores; O is rescaled once that product has landed. One barrier a
// tile, but two P tiles live: one block a multiprocessor, and no faster
// (bench/kernels/NOTES.md).
template <int kDPad, int kBlockN, int kWarpgroups, bool kOverlap>
__global__ void __launch_bounds__(kWarpgroups * 128,
                                  (min_blocks<kDPad, kBlockN, kWarpgroups, kOverlap>()))
    wgmma_attention_kernel(const bf16* __restrict__ qkv, const int32_t* __restrict__ cu_seqlens,
                           int m_blocks, int num_heads, int head_dim, float scale_log2,
                           bf16* __restrict__ out) {
#if ENCODER_KIT_HAS_WGMMA
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)
  constexpr int kBlockM = 64 * kWarpgroups;
  constexpr int kThreads = 128 * kWarpgroups;
  constexpr int kChunks = kDPad / 8;  // 16-byte chunks (core-matrix columns) per row
  constexpr uint32_t kGroupBytes = 16 * kDPad;
  constexpr int kKSteps = kDPad / 16;
  constexpr int kPSteps = kBlockN / 16;

  const QueryBlock block = query_block<kBlockM>(cu_seqlens, m_blocks);
  const int q0 = block.q0, head = block.head, start = block.start, len = block.len;
  if (q0 >= len) return;  // padded sequence or past its end: the whole block leaves

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t s_q = smem_addr(smem_raw);
  const uint32_t s_k = s_q + kBlockM * kDPad * 2;  // [2][kBlockN][kDPad]
  const uint32_t s_v = s_k + 2 * kBlockN * kDPad * 2;
  constexpr uint32_t kTileBytes = kBlockN * kDPad * 2;

  const HeadRows seq_rows = head_rows(qkv, start, head, num_heads, head_dim);
  const int64_t row_stride = seq_rows.stride;
  const bf16 *q_base = seq_rows.q, *k_base = seq_rows.k, *v_base = seq_rows.v;
  const int valid_chunks = head_dim / 8;

  // Eight consecutive threads fill one core matrix's eight rows (one
  // conflict-free shared wavefront); a warp reads 64 bytes of each of eight
  // rows. (Consecutive threads on consecutive chunks of a row, fewer L2
  // requests but conflicting writes, measured 0-8% slower: NOTES.md.)
  auto load_tile = [&](uint32_t dst, const bf16* base, int row0, int rows) {
    for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
      const int rest = i >> 3;
      const int c = rest % kChunks;
      const int r = (rest / kChunks) * 8 + (i & 7);
      const bool ok = row0 + r < len && c < valid_chunks;
      const bf16* src = ok ? base + static_cast<int64_t>(row0 + r) * row_stride + c * 8 : base;
      cp_async16(dst + (r >> 3) * kGroupBytes + c * 128 + (r & 7) * 16, src, ok);
    }
  };
  auto k_tile = [&](int it) { return s_k + (it & 1) * kTileBytes; };
  auto v_tile = [&](int it) { return s_v + (it & 1) * kTileBytes; };

  const int wg = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;
  const int t = lane & 3;
  const uint32_t q_wg = s_q + wg * 8 * kGroupBytes;  // this warpgroup's 64 rows

  float o[kDPad / 2];
#pragma unroll
  for (int i = 0; i < kDPad / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g+8, log2 domain
  float row_sum[2] = {0.0f, 0.0f};            // this thread's partial sums

  // S = Q K^T of tile `it` (64 rows of this warpgroup x kBlockN keys), issued.
  auto issue_qk = [&](float(&s)[kBlockN / 2], int it) {
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
      qk_step<kBlockN>(s, smem_desc(q_wg + kk * 256, 128, kGroupBytes),
                       smem_desc(k_tile(it) + kk * 256, 128, kGroupBytes), 1);
  };
  // O += P V of tile `it`, issued.
  auto issue_pv = [&](const uint32_t(&p)[kPSteps][4], int it) {
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk)
      pv_step<kDPad>(o, p[kk], smem_desc(v_tile(it) + kk * 2 * kGroupBytes, kGroupBytes, 128));
  };
  auto publish_tiles = [] {  // copies landed -> visible to wgmma, block-wide
    fence_async_shared();
    __syncthreads();
  };

  const int n_tiles = (len + kBlockN - 1) / kBlockN;
  if constexpr (!kOverlap) {
    load_tile(s_q, q_base, q0, kBlockM);
    load_tile(s_k, k_base, 0, kBlockN);
    cp_async_commit();
    load_tile(s_v, v_base, 0, kBlockN);
    cp_async_commit();
    for (int it = 0; it < n_tiles; ++it) {
      const bool more = it + 1 < n_tiles;
      cp_async_wait<1>();  // K_it (and Q) landed; V_it may still be in flight
      publish_tiles();
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      wgmma_fence();
      issue_qk(s, it);
      wgmma_commit();
      // The other K buffer was last read by the previous tile's products,
      // which every warpgroup waited for before the barrier above.
      if (more) load_tile(k_tile(it + 1), k_base, (it + 1) * kBlockN, kBlockN);
      cp_async_commit();  // possibly empty: keeps the group count uniform
      wgmma_wait<0>();
      fence_registers(s);
      uint32_t p[kPSteps][4];
      float alpha[2];
      online_softmax<kBlockN, false>(s, it * kBlockN, len, scale_log2, t, row_max, row_sum, p,
                                     alpha, -INFINITY);
      rescale_o<kDPad>(o, alpha);
      fence_registers(o);
      fence_registers(p);
      cp_async_wait<1>();  // V_it landed; K_{it+1} may still be in flight
      publish_tiles();
      wgmma_fence();
      issue_pv(p, it);
      wgmma_commit();
      if (more) load_tile(v_tile(it + 1), v_base, (it + 1) * kBlockN, kBlockN);
      cp_async_commit();
      wgmma_wait<0>();
      fence_registers(o);
      fence_registers(p);
    }
  } else {
    // Copies in flight at the top of iteration it >= 1: one group with K_it
    // and V_{it-1}, issued one iteration earlier.
    load_tile(s_q, q_base, q0, kBlockM);
    load_tile(s_k, k_base, 0, kBlockN);
    cp_async_commit();
    uint32_t p_prev[kPSteps][4];
    {  // tile 0: no P V to overlap with yet; O is zero, nothing to rescale
      cp_async_wait<0>();
      publish_tiles();
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      wgmma_fence();
      issue_qk(s, 0);
      wgmma_commit();
      if (n_tiles > 1) load_tile(k_tile(1), k_base, kBlockN, kBlockN);
      load_tile(v_tile(0), v_base, 0, kBlockN);
      cp_async_commit();
      wgmma_wait<0>();
      fence_registers(s);
      float alpha[2];
      online_softmax<kBlockN, false>(s, 0, len, scale_log2, t, row_max, row_sum, p_prev, alpha,
                                     -INFINITY);
    }
    for (int it = 1; it < n_tiles; ++it) {
      cp_async_wait<0>();
      publish_tiles();
      float s[kBlockN / 2];
      zeroed_for_wgmma(s);
      fence_registers(o);  // rescaled in the previous iteration
      fence_registers(p_prev);
      wgmma_fence();
      issue_qk(s, it);
      wgmma_commit();
      issue_pv(p_prev, it - 1);
      wgmma_commit();
      // Both buffers about to be filled were last read by products of the
      // previous iteration, which every warpgroup waited for before the
      // barrier above: K_{it+1} over K_{it-1}, V_it over V_{it-2}.
      if (it + 1 < n_tiles) load_tile(k_tile(it + 1), k_base, (it + 1) * kBlockN, kBlockN);
      load_tile(v_tile(it), v_base, it * kBlockN, kBlockN);
      cp_async_commit();
      wgmma_wait<1>();  // S landed; P V may still run
      fence_registers(s);
      uint32_t p[kPSteps][4];
      float alpha[2];
      online_softmax<kBlockN, false>(s, it * kBlockN, len, scale_log2, t, row_max, row_sum, p,
                                     alpha, -INFINITY);
      wgmma_wait<0>();
      // P V has landed: only now may O change, and p_prev's registers be
      // reused (the fence keeps p in registers of its own until here).
      fence_registers(o);
      fence_registers(p_prev);
      rescale_o<kDPad>(o, alpha);
#pragma unroll
      for (int kk = 0; kk < kPSteps; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) p_prev[kk][x] = p[kk][x];
    }
    cp_async_wait<0>();  // V of the last tile
    publish_tiles();
    fence_registers(o);
    fence_registers(p_prev);
    wgmma_fence();
    issue_pv(p_prev, n_tiles - 1);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o);
  }

  const int row_g = q0 + wg * 64 + ((threadIdx.x % 128) / 32) * 16 + (lane >> 2);
  write_rows<kDPad>(o, row_sum, row_g, t, len, start, head, num_heads, head_dim, out);
#else
  (void)qkv, (void)cu_seqlens, (void)m_blocks, (void)num_heads, (void)head_dim, (void)scale_log2,
      (void)out;
  __trap();
#endif
}

template <int kDPad, int kBlockN, int kWarpgroups, bool kOverlap>
int launch(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs, int max_seqlen, int num_heads,
           int head_dim, float scale, bf16* out, cudaStream_t stream) {
  constexpr int kBlockM = 64 * kWarpgroups;
  constexpr size_t kSmem = smem_bytes<kDPad, kBlockN, kWarpgroups>();
  auto* kernel = wgmma_attention_kernel<kDPad, kBlockN, kWarpgroups, kOverlap>;
  const int opt_in = detail::opt_in_dynamic_smem(kernel, kSmem);
  if (opt_in != 0) return opt_in;
  const int m_blocks = (max_seqlen + kBlockM - 1) / kBlockM;
  ENCODER_KIT_REQUIRE(static_cast<int64_t>(max_seqs) * m_blocks <= int64_t{0x7fffffff});
  const dim3 grid(static_cast<unsigned>(max_seqs * m_blocks), static_cast<unsigned>(num_heads));
  return detail::launch_kernel(kernel, grid, dim3(kWarpgroups * 128), kSmem, stream, qkv,
                               cu_seqlens, m_blocks, num_heads, head_dim,
                               scale * 1.4426950408889634f, out);
}

}  // namespace

namespace detail {

const char* sm90_attention_variant_name(int variant) {
  switch (variant) {
    case 0: return "wgmma, 64-key tiles, in turn";
    case 1: return "wgmma, 64-key tiles, overlapped";
    case 2: return "wgmma, 128-key tiles, overlapped";
    case 3: return "wgmma, 64-key tiles, TMA ring";
    case 4: return "wgmma, 64-key tiles, TMA ring, max moved every tile";
    case 5: return "wgmma, 64-key tiles, TMA ring, tails by cp.async";
    case 6: return "wgmma, 64-key tiles, TMA ring, former grid and 4-byte stores";
    default: return "?";
  }
}

bool sm90_attention_supported() {
  // Per device, once: an sm_90a cubin loads on compute capability 9.0 only.
  static std::mutex mutex;
  static std::vector<int> known;  // per device: -1 unknown, 0 no, 1 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<int>(known.size()) <= device) known.resize(static_cast<size_t>(device) + 1, -1);
  if (known[device] < 0) {
    int major = 0, minor = 0;
    cudaFuncAttributes attr{};
    const bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
        major == 9 && minor == 0 &&
        cudaFuncGetAttributes(&attr, wgmma_attention_kernel<80, 64, 2, false>) == cudaSuccess;
    if (!ok) (void)cudaGetLastError();  // a failed lookup must not linger as a sticky error
    known[device] = ok ? 1 : 0;
  }
  return known[device] == 1;
}

// The rules every variant's arguments follow.
static int check_arguments(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs, int max_seqlen,
                           int num_heads, int head_dim, const bf16* out) {
  ENCODER_KIT_REQUIRE(qkv != nullptr && cu_seqlens != nullptr && out != nullptr);
  ENCODER_KIT_REQUIRE(aligned16(qkv) && aligned16(out));
  ENCODER_KIT_REQUIRE(max_seqs >= 0 && max_seqlen >= 0 && num_heads > 0 && num_heads <= 65535);
  ENCODER_KIT_REQUIRE(head_dim > 0 && head_dim % 8 == 0 && head_dim <= 128);
  ENCODER_KIT_REQUIRE(sm90_attention_supported());
  return 0;
}

int varlen_attention_bf16_sm90(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                               int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                               int variant, cudaStream_t stream) {
  if (const int err =
          check_arguments(qkv, cu_seqlens, max_seqs, max_seqlen, num_heads, head_dim, out))
    return err;
  ENCODER_KIT_REQUIRE(variant >= 0 && variant < kSm90AttentionVariants);
  if (max_seqs == 0 || max_seqlen == 0) return 0;
  if (variant >= 3) {
    TmaForm form;  // variant 3: lazy max, end-aligned tails, sequence-major, staged stores
    form.lazy = variant != 4;
    form.end_aligned = variant != 5;
    form.former = variant == 6;
    return varlen_attention_bf16_sm90_tma(qkv, cu_seqlens, max_seqs, max_seqlen, num_heads,
                                          head_dim, scale, out, form, stream);
  }
  auto go = [&](auto dpad) {
    constexpr int d = decltype(dpad)::value;
    auto run = [&](auto kernel_launch) {
      return kernel_launch(qkv, cu_seqlens, max_seqs, max_seqlen, num_heads, head_dim, scale, out,
                           stream);
    };
    switch (variant) {
      case 0: return run(launch<d, 64, 2, false>);
      case 1: return run(launch<d, 64, 2, true>);
      default: return run(launch<d, 128, 2, true>);
    }
  };
  if (head_dim <= 64) return go(std::integral_constant<int, 64>{});
  if (head_dim <= 80) return go(std::integral_constant<int, 80>{});
  if (head_dim <= 96) return go(std::integral_constant<int, 96>{});
  return go(std::integral_constant<int, 128>{});
}

}  // namespace detail
}  // namespace encoder_kit::cuda
