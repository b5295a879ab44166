// The attention family's Hopper instance (attention.hpp, AttentionKernel::
// Hopper): variable-length attention with the K and V tiles brought in by the
// tensor-memory accelerator (TMA, sm_90a). A block is two warpgroups of 64
// query rows; per 64-key tile, S = Q K^T (wgmma, Q and K from shared memory),
// the online softmax, and O += P V (P from registers) run in turn:
//  - one thread issues TMA loads of whole K and V tiles into a ring of
//    kStages stages; each tile completes on its stage's "full" mbarrier (K and
//    V apart, so Q K^T starts while V is still in flight), and every warp
//    arrives on the stage's "empty" mbarrier once its products have read it.
//    No block barrier in the loop: the two warpgroups drift apart, and one
//    runs its softmax while the other holds the tensor cores;
//  - the math warps compute no addresses and wait on no cp.async scoreboard;
//  - tiles are 128-byte swizzled (as TMA writes them and wgmma reads them
//    without bank conflicts): the first 64 columns of a row in one part, the
//    rest (16, 32 or 64 columns: head_dim 80, 96, 128) in a second part with
//    the swizzle of its width. Columns past head_dim arrive as zeros.
//  - TMA moves whole boxes, and a box that crosses a sequence's end would
//    read the next sequence's rows (or rows no sequence covers, which may hold
//    anything: a NaN there times a zero probability is NaN). So every box
//    lies inside its sequence: a sequence's last, partial key tile is its
//    last 64 rows, with the keys the tile before already covered masked, and
//    the query block at its end is its last 128 rows, writing only the rows
//    no block before it owns (end-aligned tails). Sequences shorter than a
//    box fall back to cp.async copies with the rows past the end zeroed,
//    behind a block barrier.
// Shared steps (fences, softmax, output rows): attention_sm90_common.cuh.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/ptx.cuh>

#include "attention_sm90_common.cuh"
#include "launch.cuh"
#include "smem_opt_in.hpp"
#include "tensor_map.hpp"
#include "tma_sm90.cuh"

#include <cuda.h>
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

constexpr int kBlockM = 128;  // two warpgroups of 64 query rows
constexpr int kBlockN = 64;   // keys a tile
constexpr int kThreads = 256;
// How far (log2 units) a row's scores may rise above its running max before
// the max moves and O is rescaled (online_softmax): probabilities up to 2^8.
constexpr float kRescaleSlack = 8.0f;

// Shared-memory geometry for head_dim padded to kDPad (64, 80, 96 or 128).
template <int kDPad>
struct Geometry {
  static constexpr int kTail = kDPad - 64;               // columns of the second part
  static constexpr uint32_t kTailRow = 2 * kTail;        // its row, bytes: 0, 32, 64, 128
  static constexpr uint32_t kRowBytes = 128 + kTailRow;  // both parts of one row
  static constexpr int kStages = kDPad <= 96 ? 3 : 2;    // two blocks a multiprocessor either way
  static constexpr uint32_t kQBytes = kBlockM * kRowBytes;
  static constexpr uint32_t kTileBytes = kBlockN * kRowBytes;  // one K or one V tile
  static constexpr uint32_t kStageBytes = 2 * kTileBytes;
  // Full Q; full K, full V and empty a stage.
  static constexpr uint32_t kBarrierBytes = 8 * (1 + 3 * kStages);
  // 1024 bytes of slack: 128-byte swizzled parts start on 1024-byte boundaries.
  static constexpr size_t kSmem = 1024 + kQBytes + kStages * kStageBytes + kBarrierBytes;
  // The wgmma layout type of the second part's swizzle (bits 62-63).
  static constexpr uint64_t kTailLayout = kTailRow == 32 ? 3 : kTailRow == 64 ? 2 : 1;
  static_assert(kTail == 0 || kTail == 16 || kTail == 32 || kTail == 64, "padded head_dim");
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "parts stay 1024-byte aligned");
};

// Byte offset of 16-byte chunk c of row r in a part whose rows are row_bytes
// wide (32, 64 or 128), swizzled as TMA and wgmma do (the chunk index XORed
// with address bits 7 and up): the part starts on a boundary of 8 rows.
__device__ __forceinline__ uint32_t swizzled(int r, int c, uint32_t row_bytes) {
  const uint32_t o = static_cast<uint32_t>(r) * row_bytes + static_cast<uint32_t>(c) * 16;
  return o ^ (((o >> 7) & (row_bytes / 16 - 1)) << 4);
}

// Descriptor of a swizzled part, the same for both operand kinds. K-major (Q
// and K: rows are queries or keys, the head dimension contiguous): 8-row
// atoms of 8 * row bytes, one k16 step 32 bytes further along the row.
// N-major (V as P V's B operand: rows are keys, N the head dimension): one
// atom spans the part's width, 8 keys further is 8 * row bytes. Either way the
// stride byte offset is 8 * row bytes and the leading one unused (a part is
// one atom wide).
__device__ __forceinline__ uint64_t desc_swizzled(uint32_t addr, uint32_t row_bytes,
                                                  uint64_t layout) {
  return smem_desc(addr, 16, 8 * row_bytes) | (layout << 62);
}

// One k16 step of O[:, col0 : col0 + n) += P V over the part holding those
// columns, accumulating into o's entries for them (the m64nN fragment layout
// numbers an n8 column block j as o[4j .. 4j+3], so a part's accumulators are
// a contiguous run of o).
template <int kDPad, int kCol0, int kN>
__device__ __forceinline__ void pv_part(float (&o)[kDPad / 2], const uint32_t (&a)[4],
                                        uint64_t db) {
  auto& part = *reinterpret_cast<float(*)[kN / 2]>(&o[kCol0 / 2]);
  if constexpr (kN == 16)
    wgmma_m64n16k16_rs(part, a, db);
  else if constexpr (kN == 32)
    wgmma_m64n32k16_rs(part, a, db);
  else
    wgmma_m64n64k16_rs(part, a, db);
}

struct Maps {
  CUtensorMap q_main, q_tail, kv_main, kv_tail;
};

// One query block of one head: the block's item, and what it reads, worked
// out from its sequence's length. Its sequence's rows start at `start`; len
// 0 marks an item with nothing to do (a padded sequence, or a block past the
// sequence's end). Its key tiles: whole ones, and a partial last one as the
// sequence's last kBlockN rows, all by TMA where the sequence holds a box
// (kBlockN rows), else by cp.async. The first query row of its Q tile: q0, or the
// sequence's last kBlockM rows for the block at its end (rows below q0 are
// read, not written).
struct Item {
  int start, len, q0;
  int n_tiles, n_full, n_tma, q_first;
  int q_by_tma;
  // A tile's first key: past the whole tiles only the end-aligned last one.
  __device__ __forceinline__ int key0(int tile) const {
    return tile < n_full ? tile * kBlockN : len - kBlockN;
  }
};

// The grid: sequence-major (flat x: a head's query blocks fastest, then
// heads, then sequences), so a sequence's blocks run together and its qkv
// rows come from DRAM once. (One head of many sequences at a time, heads
// fastest within a sequence, and each sequence's first block asking L2 for
// the next sequence's rows measured slower: bench/kernels/EXPERIMENTS.md.)
struct BlockCoords {
  int x;  // sequence * m_blocks + query block, as make_item takes it
  int head;
};

__device__ __forceinline__ BlockCoords block_coords(int m_blocks, int num_heads) {
  const int flat = static_cast<int>(blockIdx.x);
  const int qb = flat % m_blocks;
  const int seq_head = flat / m_blocks;
  return {(seq_head / num_heads) * m_blocks + qb, seq_head % num_heads};
}

// Query block x (of m_blocks a sequence).
__device__ __forceinline__ Item make_item(const int32_t* __restrict__ cu_seqlens, int x,
                                          int m_blocks) {
  Item item{};
  const int seq = x / m_blocks;
  item.q0 = (x - seq * m_blocks) * kBlockM;
  item.start = cu_seqlens[seq];
  item.len = cu_seqlens[seq + 1] - item.start;
  if (item.q0 >= item.len) {
    item.len = 0;
    return item;
  }
  item.n_tiles = (item.len + kBlockN - 1) / kBlockN;
  item.n_full = item.len / kBlockN;
  item.n_tma = item.len >= kBlockN ? item.n_tiles : item.n_full;
  const bool q_end = item.q0 + kBlockM > item.len && item.len >= kBlockM;
  item.q_first = q_end ? item.len - kBlockM : item.q0;
  item.q_by_tma = item.q_first + kBlockM <= item.len;
  return item;
}

// kLazy: the running max moves lazily (online_softmax, kRescaleSlack); false
// moves it every tile, head_dim 128's form (lazy, it would pass the
// 128-register bound).
//
// A block runs one query block of one head (block_coords: the grid's order)
// and leaves at once when it has nothing to do. Thread 0
// issues Q and the first kStages tiles, then refills the stage of tile it - 1
// while its warpgroup's Q K^T of tile it runs. (Chaining up to four query
// blocks a block, the next one's Q and first tiles loading during the
// current one's last, measured 5-30% slower: bench/kernels/EXPERIMENTS.md;
// commit 521041b holds it.)
template <int kDPad, bool kLazy>
__global__ void __launch_bounds__(kThreads, 2)
    tma_attention_kernel(const __grid_constant__ CUtensorMap map_q_main,
                         const __grid_constant__ CUtensorMap map_q_tail,
                         const __grid_constant__ CUtensorMap map_kv_main,
                         const __grid_constant__ CUtensorMap map_kv_tail,
                         const bf16* __restrict__ qkv, const int32_t* __restrict__ cu_seqlens,
                         int m_blocks, int num_heads, int head_dim, float scale_log2,
                         bf16* __restrict__ out) {
#if ENCODER_KIT_HAS_WGMMA
  using G = Geometry<kDPad>;
  constexpr int kStages = G::kStages;
  constexpr int kPSteps = kBlockN / 16;
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)

  const BlockCoords coords = block_coords(m_blocks, num_heads);
  const Item item = make_item(cu_seqlens, coords.x, m_blocks);
  if (item.len == 0) return;  // padded sequence or past its end: the whole block leaves
  const int start = item.start, len = item.len;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  // Q, then per stage K main, K tail, V main, V tail (each Q or tile as
  // [main part: rows of 128 bytes][tail part]), then the barriers.
  const uint32_t s_q = base;
  auto k_tile = [&](int stage) { return base + G::kQBytes + stage * G::kStageBytes; };
  auto v_tile = [&](int stage) { return k_tile(stage) + G::kTileBytes; };
  const uint32_t bars = base + G::kQBytes + kStages * G::kStageBytes;
  const uint32_t full_q = bars;
  auto full_k = [&](int stage) { return bars + 8 * (1 + stage); };
  auto full_v = [&](int stage) { return bars + 8 * (1 + kStages + stage); };
  auto empty = [&](int stage) { return bars + 8 * (1 + 2 * kStages + stage); };

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  const int lane = tid % 32;
  const int t = lane & 3;
  const int head = coords.head;

  const HeadRows seq_rows = head_rows(qkv, start, head, num_heads, head_dim);
  const int64_t row_stride = seq_rows.stride;
  const bf16 *q_base = seq_rows.q, *k_base = seq_rows.k, *v_base = seq_rows.v;

  // cp.async copy of `rows` rows from row0 (the sequence's rows only, zeros
  // past its end and past head_dim) into the swizzled two-part layout.
  const int valid_chunks = head_dim / 8;
  auto copy_rows = [&](uint32_t dst, const bf16* src_base, int row0, int rows) {
    constexpr int kChunks = kDPad / 8;
    const uint32_t tail = dst + static_cast<uint32_t>(rows) * 128;
    for (int i = tid; i < rows * kChunks; i += kThreads) {
      const int r = i / kChunks;
      const int c = i - r * kChunks;
      const bool ok = row0 + r < len && c < valid_chunks;
      const bf16* src =
          ok ? src_base + static_cast<int64_t>(row0 + r) * row_stride + c * 8 : src_base;
      const uint32_t at =
          c < 8 ? dst + swizzled(r, c, 128) : tail + swizzled(r, c - 8, G::kTailRow);
      cp_async16(at, src, ok);
    }
  };
  // One TMA box pair (both parts) of `rows` rows from token `token`.
  auto tma_rows = [&](uint32_t dst, const CUtensorMap* main_map, const CUtensorMap* tail_map,
                      int slot, int token, int rows, uint32_t bar) {
    tma_load_3d(dst, main_map, 0, slot, token, bar);
    if constexpr (G::kTail > 0)
      tma_load_3d(dst + static_cast<uint32_t>(rows) * 128, tail_map, 64, slot, token, bar);
  };
  // Tile `tile` (its first key item.key0(tile)) into its stage (one thread).
  auto issue_kv = [&](int tile) {
    const int stage = tile % kStages;
    const int token = start + item.key0(tile);
    mbarrier_arrive_expect_tx(full_k(stage), G::kTileBytes);
    tma_rows(k_tile(stage), &map_kv_main, &map_kv_tail, num_heads + head, token, kBlockN,
             full_k(stage));
    mbarrier_arrive_expect_tx(full_v(stage), G::kTileBytes);
    tma_rows(v_tile(stage), &map_kv_main, &map_kv_tail, 2 * num_heads + head, token, kBlockN,
             full_v(stage));
  };

  if (tid == 0) {
    mbarrier_init(full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full_k(s), 1);
      mbarrier_init(full_v(s), 1);
      mbarrier_init(empty(s), kThreads / 32);  // every warp, once its products are done
    }
    fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    if (item.q_by_tma) {
      mbarrier_arrive_expect_tx(full_q, G::kQBytes);
      tma_rows(s_q, &map_q_main, &map_q_tail, head, start + item.q_first, kBlockM, full_q);
    }
    for (int tile = 0; tile < min(kStages, item.n_tma); ++tile) issue_kv(tile);
  }
  if (item.q_by_tma) {
    mbarrier_wait(full_q, 0);
  } else {
    copy_rows(s_q, q_base, item.q_first, kBlockM);
    cp_async_commit();
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();
  }

  // This warpgroup's 64 query rows, both parts.
  const uint32_t q_main = s_q + wg * 64 * 128;
  const uint32_t q_tail = s_q + kBlockM * 128 + wg * 64 * G::kTailRow;
  auto issue_qk = [&](float(&s)[kBlockN / 2], int stage) {
    const uint32_t k_main = k_tile(stage);
    const uint32_t k_tail = k_main + kBlockN * 128;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      qk_step<kBlockN>(s, smem_desc_sw128(q_main + kk * 32), smem_desc_sw128(k_main + kk * 32), 1);
#pragma unroll
    for (int kk = 0; kk < G::kTail / 16; ++kk)
      qk_step<kBlockN>(s, desc_swizzled(q_tail + kk * 32, G::kTailRow, G::kTailLayout),
                       desc_swizzled(k_tail + kk * 32, G::kTailRow, G::kTailLayout), 1);
  };
  float o[kDPad / 2];
#pragma unroll
  for (int i = 0; i < kDPad / 2; ++i) o[i] = 0.0f;
  auto issue_pv = [&](const uint32_t(&p)[kPSteps][4], int stage) {
    const uint32_t v_main = v_tile(stage);
    const uint32_t v_tail = v_main + kBlockN * 128;
#pragma unroll
    for (int kk = 0; kk < kPSteps; ++kk) {  // 16 keys a step: two 8-row atoms
      pv_part<kDPad, 0, 64>(o, p[kk], desc_swizzled(v_main + kk * 16 * 128, 128, 1));
      if constexpr (G::kTail > 0)
        pv_part<kDPad, 64, G::kTail>(
            o, p[kk], desc_swizzled(v_tail + kk * 16 * G::kTailRow, G::kTailRow, G::kTailLayout));
    }
  };

  float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g+8, log2 domain
  float row_sum[2] = {0.0f, 0.0f};
  for (int it = 0; it < item.n_tiles; ++it) {
    const int stage = it % kStages;
    const uint32_t parity = static_cast<uint32_t>(it / kStages) & 1u;
    const bool by_tma = it < item.n_tma;
    if (!by_tma) {
      // A partial tile of a sequence shorter than a box (or any partial
      // tile, without end-aligned tails): the sequence's last. Its stage was
      // last filled for tile it - kStages, whose products every warp has
      // finished once all are past this barrier; no TMA is ever issued into
      // it again.
      __syncthreads();
      copy_rows(k_tile(stage), k_base, it * kBlockN, kBlockN);
      copy_rows(v_tile(stage), v_base, it * kBlockN, kBlockN);
      cp_async_commit();
      cp_async_wait<0>();
      fence_async_shared();
      __syncthreads();
    } else {
      mbarrier_wait(full_k(stage), parity);
    }
    float s[kBlockN / 2];
    zeroed_for_wgmma(s);
    wgmma_fence();
    issue_qk(s, stage);
    wgmma_commit();
    // The copier refills the stage of the tile before, as soon as every warp
    // has released it, while this warpgroup's Q K^T runs. (Tile it - 1's last
    // reader may be the other warpgroup, one tile behind at most.)
    if (tid == 0 && it >= 1 && it - 1 + kStages < item.n_tma) {
      const int prev = it - 1;
      mbarrier_wait(empty(prev % kStages), static_cast<uint32_t>(prev / kStages) & 1u);
      issue_kv(prev + kStages);
    }
    __syncwarp();
    wgmma_wait<0>();
    fence_registers(s);
    uint32_t p[kPSteps][4];
    float alpha[2];
    // An end-aligned last tile starts before it * kBlockN: the keys below
    // that, which the tile before covered, are masked.
    if (online_softmax<kBlockN, kLazy>(s, by_tma ? item.key0(it) : it * kBlockN, len, scale_log2, t,
                                       row_max, row_sum, p, alpha, kRescaleSlack, it * kBlockN))
      rescale_o<kDPad>(o, alpha);
    fence_registers(o);
    fence_registers(p);
    if (by_tma) mbarrier_wait(full_v(stage), parity);
    wgmma_fence();
    issue_pv(p, stage);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(o);
    fence_registers(p);
    if (by_tma && lane == 0) mbarrier_arrive(empty(stage));
  }

  // Every warp is past its last tile (each waited on every tile's full
  // barriers, and no copy is in flight): shared memory is free. Each warp
  // stages its 16 rows and writes them as 16-byte chunks, where 4-byte
  // stores of the accumulators' pairs wrote each 32-byte sector twice.
  __syncthreads();
  const int warp_row0 = item.q_first + wg * 64 + ((tid % 128) / 32) * 16;
  constexpr int kStageStride = kDPad + 8;  // 16 bytes of pad: conflict-free writes
  static_assert(kThreads / 32 * 16 * kStageStride * 2 <= G::kQBytes + G::kStageBytes,
                "the staged rows fit in Q and the first stage");
  auto* stage = reinterpret_cast<bf16*>(smem_raw + (base - smem_addr(smem_raw))) +
                (tid / 32) * 16 * kStageStride;
  const int64_t out_stride = static_cast<int64_t>(num_heads) * head_dim;
  store_warp_rows<kDPad / 8, kStageStride>(
      reinterpret_cast<const float(&)[kDPad / 8][4]>(o), row_sum, stage, lane, warp_row0, len,
      head_dim / 8, out + static_cast<int64_t>(start) * out_stride + head * head_dim, out_stride,
      item.q0);
#else
  (void)map_q_main, (void)map_q_tail, (void)map_kv_main, (void)map_kv_tail, (void)qkv,
      (void)cu_seqlens, (void)m_blocks, (void)num_heads, (void)head_dim, (void)scale_log2,
      (void)out;
  __trap();
#endif
}

// One of q, k, v of every head (y: 3 * num_heads slots of head_dim columns)
// over `tokens` rows (z), read in boxes of `rows` tokens by `cols` columns from
// column 0 or 64, swizzled by the box's row width; zeros past head_dim.
int encode_qkv(CUtensorMap* map, const bf16* qkv, int64_t tokens, int num_heads, int head_dim,
               int cols, int rows) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim),
                              static_cast<cuuint64_t>(3 * num_heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * sizeof(bf16),
                                 static_cast<cuuint64_t>(3 * num_heads) * head_dim * sizeof(bf16)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(cols), 1, static_cast<cuuint32_t>(rows)};
  const CUtensorMapSwizzle swizzle = cols == 16   ? CU_TENSOR_MAP_SWIZZLE_32B
                                     : cols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_128B;
  return detail::encode_bf16_tiled(map, qkv, 3, dims, strides, box, swizzle,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

template <int kDPad, bool kLazy>
int launch(const AttentionParams& p) {
  using G = Geometry<kDPad>;
  // The maps' extent in tokens: every token an int32 cu_seqlens can name.
  // Sequences start anywhere in qkv (a plugin passes cu_seqlens + first for
  // one bucket of a batch), so max_seqs x max_seqlen is no bound; TMA reads
  // only tiles inside a sequence, never the rows past the buffer's end.
  const int64_t tokens = int64_t{0x7fffffff};
  Maps maps{};
  const int tail = G::kTail > 0 ? G::kTail : 64;  // unused when there is no tail part
  const int heads = p.num_heads, head_dim = p.head_dim;
  if (const int err = encode_qkv(&maps.q_main, p.qkv, tokens, heads, head_dim, 64, kBlockM))
    return err;
  if (const int err = encode_qkv(&maps.q_tail, p.qkv, tokens, heads, head_dim, tail, kBlockM))
    return err;
  if (const int err = encode_qkv(&maps.kv_main, p.qkv, tokens, heads, head_dim, 64, kBlockN))
    return err;
  if (const int err = encode_qkv(&maps.kv_tail, p.qkv, tokens, heads, head_dim, tail, kBlockN))
    return err;
  auto* kernel = tma_attention_kernel<kDPad, kLazy>;
  const int opt_in = detail::opt_in_dynamic_smem(kernel, G::kSmem);
  if (opt_in != 0) return opt_in;
  const int m_blocks = (p.max_seqlen + kBlockM - 1) / kBlockM;
  const int64_t blocks = static_cast<int64_t>(p.max_seqs) * m_blocks * heads;
  ENCODER_KIT_REQUIRE(blocks <= int64_t{0x7fffffff});
  return detail::launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                               G::kSmem, p.stream, maps.q_main, maps.q_tail, maps.kv_main,
                               maps.kv_tail, p.qkv, p.cu_seqlens, m_blocks, heads, head_dim,
                               p.scale * 1.4426950408889634f, p.out);
}

}  // namespace

namespace detail {

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
        cudaFuncGetAttributes(&attr, tma_attention_kernel<80, true>) == cudaSuccess &&
        tensor_map_encoder() != nullptr;
    if (!ok) (void)cudaGetLastError();  // a failed lookup must not linger as a sticky error
    known[device] = ok ? 1 : 0;
  }
  return known[device] == 1;
}

int run_attention_hopper(const AttentionParams& p) {
  // The running max moves lazily up to head_dim 96; at 128 the lazy form
  // would pass the 128-register bound of two blocks a multiprocessor.
  auto go = [&](auto dpad) {
    constexpr int d = decltype(dpad)::value;
    return launch<d, (d <= 96)>(p);
  };
  if (p.head_dim <= 64) return go(std::integral_constant<int, 64>{});
  if (p.head_dim <= 80) return go(std::integral_constant<int, 80>{});
  if (p.head_dim <= 96) return go(std::integral_constant<int, 96>{});
  return go(std::integral_constant<int, 128>{});
}

}  // namespace detail
}  // namespace encoder_kit::cuda
