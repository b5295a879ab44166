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

// What a launch reads and writes beyond the tensor maps. Packed qkv is the
// case q = qkv, k = q + num_heads * head_dim, v = k + num_heads * head_dim,
// both strides 3 * num_heads * head_dim, group 1 (AttentionParams); the
// extras give their own (AttentionExtras).
struct Args {
  const int32_t* cu_seqlens;  // packed qkv (kExtras false)
  int seq_len;                // kExtras: every sequence's length, one after another
  int m_blocks, num_heads, head_dim;
  int group;  // query heads per KV head
  float scale_log2;
  const bf16* q;
  const bf16* k;
  const bf16* v;
  int64_t q_stride, kv_stride, out_stride;  // elements
  bf16* out;
  // The decomposed relative-position bias (kBias > 0): tables and grid.
  const bf16* rel_h;
  const bf16* rel_w;
  int hn, wn;
  float inv_wn;               // 1 / wn
  float inv_scale;            // the products are kept divided by the scale (they seed S)
  const int32_t* view_count;  // kExtras; may be null
  int seqs_per_view;
};

// One query block of one head: the block's item, and what it reads, worked
// out from its sequence's length. Its sequence's rows start at `start`; len
// 0 marks an item with nothing to do (a padded sequence or view, or a block
// past the sequence's end). Its key tiles: whole ones, and a partial last one
// as the sequence's last kBlockN rows, all by TMA where the sequence holds a
// box (kBlockN rows), else by cp.async. The first query row of its Q tile:
// q0, or the sequence's last kBlockM rows for the block at its end (rows below
// q0 are read, not written).
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

// Query block x (of m_blocks a sequence); kExtras: sequences of seq_len rows
// and padded views, else cu_seqlens.
template <bool kExtras>
__device__ __forceinline__ Item make_item(const Args& a, int x) {
  Item item{};
  const int seq = x / a.m_blocks;
  item.q0 = (x - seq * a.m_blocks) * kBlockM;
  if constexpr (!kExtras) {
    item.start = a.cu_seqlens[seq];
    item.len = a.cu_seqlens[seq + 1] - item.start;
  } else if (a.view_count != nullptr && int64_t{seq} >= int64_t{*a.view_count} * a.seqs_per_view) {
    return item;  // a padded view: len 0
  } else {
    item.start = seq * a.seq_len;  // fits: the dispatch bounds max_seqs x max_seqlen
    item.len = a.seq_len;
  }
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

// The decomposed relative-position bias (DeepSeek-OCR-2's SAM): the logit of
// query cell (qy, qx) and key cell (ky, kx) gains q . rel_h[qy - ky + hn - 1] +
// q . rel_w[qx - kx + wn - 1]. Each warpgroup computes its 64 rows' products
// against both tables once (wgmma, the tables staged in the two last ring
// stages before any key tile goes there) and keeps, per query row, the hn
// values of the first indexed by ky and the wn of the second by kx, in bf16
// divided by the scale: the S accumulator of a tile starts from their sums,
// and Q K^T accumulates onto it. kMaxHopperRelGrid bounds hn and wn (a table
// of 2n - 1 <= 127 rows is one m64n128 product).
constexpr int kBiasCols = 2 * kMaxHopperRelGrid;  // [ky values | kx values]
constexpr int kBiasStride = kBiasCols + 8;        // bf16; 16 bytes of skew a row
constexpr uint32_t kBiasBytes = kBlockM * kBiasStride * 2;

// kLazy: the running max moves lazily (online_softmax, kRescaleSlack); false
// moves it every tile, head_dim 128's form (lazy, it would pass the
// 128-register bound). kBias: 0 none, 1 the relative-position bias key by
// key, 2 the same with keys paired (wn even: keys 2i and 2i + 1 share a grid
// row and read their two kx values at once); head_dim 64 only. kExtras:
// AttentionExtras' layouts (sequences of equal length, padded views, grouped
// KV heads); without it the plain instances keep the code (and registers) of
// packed qkv alone.
//
// A block runs one query block of one head (block_coords: the grid's order)
// and leaves at once when it has nothing to do. Thread 0
// issues Q and the first kStages tiles, then refills the stage of tile it - 1
// while its warpgroup's Q K^T of tile it runs. (Chaining up to four query
// blocks a block, the next one's Q and first tiles loading during the
// current one's last, measured 5-30% slower: bench/kernels/EXPERIMENTS.md;
// commit 521041b holds it.)
template <int kDPad, bool kLazy, bool kExtras, int kBias>
__global__ void __launch_bounds__(kThreads, 2)
    tma_attention_kernel(const __grid_constant__ CUtensorMap map_q_main,
                         const __grid_constant__ CUtensorMap map_q_tail,
                         const __grid_constant__ CUtensorMap map_k_main,
                         const __grid_constant__ CUtensorMap map_k_tail,
                         const __grid_constant__ CUtensorMap map_v_main,
                         const __grid_constant__ CUtensorMap map_v_tail, const Args args) {
#if ENCODER_KIT_HAS_WGMMA
  using G = Geometry<kDPad>;
  constexpr int kStages = G::kStages;
  constexpr int kPSteps = kBlockN / 16;
  static_assert(
      kBias == 0 || (kExtras && kDPad == 64 && kStages == 3 && G::kStageBytes == 128 * 128),
      "the bias: head_dim 64, a table of 128 rows a stage, tile 0's stage apart");
  detail::wait_for_prior_grid();  // before any global access (launch.cuh)

  const BlockCoords coords = block_coords(args.m_blocks, args.num_heads);
  const Item item = make_item<kExtras>(args, coords.x);
  if (item.len == 0) return;  // padded sequence or view, or past its end: the block leaves
  const int start = item.start, len = item.len;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  // Q, then per stage K main, K tail, V main, V tail (each Q or tile as
  // [main part: rows of 128 bytes][tail part]), then the barriers, then (with
  // the bias) the products.
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
  const int kv_head = kExtras ? head / args.group : head;
  const int head_dim = args.head_dim;

  const bf16* q_base =
      args.q + static_cast<int64_t>(start) * args.q_stride + static_cast<int64_t>(head) * head_dim;
  const int64_t kv_first =
      static_cast<int64_t>(start) * args.kv_stride + static_cast<int64_t>(kv_head) * head_dim;
  const bf16* k_base = args.k + kv_first;
  const bf16* v_base = args.v + kv_first;

  // cp.async copy of `rows` rows from row0 (the sequence's rows only, zeros
  // past its end and past head_dim) into the swizzled two-part layout.
  const int valid_chunks = head_dim / 8;
  auto copy_rows = [&](uint32_t dst, const bf16* src_base, int64_t row_stride, int row0, int rows) {
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
    tma_rows(k_tile(stage), &map_k_main, &map_k_tail, kv_head, token, kBlockN, full_k(stage));
    mbarrier_arrive_expect_tx(full_v(stage), G::kTileBytes);
    tma_rows(v_tile(stage), &map_v_main, &map_v_tail, kv_head, token, kBlockN, full_v(stage));
  };
  // With the bias the two last stages hold the tables until the products are
  // done: only tile 0 goes out first.
  const int first_tiles = min(kBias > 0 ? 1 : kStages, item.n_tma);

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
    for (int tile = 0; tile < first_tiles; ++tile) issue_kv(tile);
  }
  if constexpr (kBias > 0) {
    // The tables, rows past 2n - 1 and columns past head_dim zero, into the
    // two last stages (128 rows of 128 bytes each), swizzled as TMA would.
    auto stage_table = [&](uint32_t dst, const bf16* table, int n) {
      for (int i = tid; i < 128 * 8; i += kThreads) {
        const int r = i / 8, c = i % 8;
        const bool ok = r < 2 * n - 1 && c < valid_chunks;
        cp_async16(dst + swizzled(r, c, 128), ok ? table + r * head_dim + c * 8 : table, ok);
      }
    };
    stage_table(k_tile(kStages - 2), args.rel_h, args.hn);
    stage_table(k_tile(kStages - 1), args.rel_w, args.wn);
    cp_async_commit();
  }
  if (item.q_by_tma) {
    mbarrier_wait(full_q, 0);
  } else {
    copy_rows(s_q, q_base, args.q_stride, item.q_first, kBlockM);
    cp_async_commit();
  }
  if (kBias > 0 || !item.q_by_tma) {
    cp_async_wait<0>();
    fence_async_shared();
    __syncthreads();
  }

  // This warpgroup's 64 query rows, both parts.
  const uint32_t q_main = s_q + wg * 64 * 128;
  const uint32_t q_tail = s_q + kBlockM * 128 + wg * 64 * G::kTailRow;

  // The bias: this thread's two rows (g and g + 8 of its warp) of the
  // products, and its rows' query cells.
  const int warp_row = wg * 64 + ((tid % 128) / 32) * 16 + lane / 4;  // row g, in the block
  const uint32_t bias_base = bars + G::kBarrierBytes;
  uint32_t bias_row[2] = {0, 0};
  if constexpr (kBias > 0) {
    int cell_y[2], cell_x[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      bias_row[r] = bias_base + static_cast<uint32_t>((warp_row + 8 * r) * kBiasStride * 2);
      const int token = item.q_first + warp_row + 8 * r;
      const int cell = token < len ? token : 0;  // rows past the end: results dropped
      cell_y[r] = cell / args.wn;
      cell_x[r] = cell - cell_y[r] * args.wn;
    }
    // Q . table^T for the warpgroup's 64 rows (table row jj in column jj),
    // stored at the key cell it serves: ky = qy + hn - 1 - jj (kx alike).
    auto products = [&](uint32_t table, const int(&own)[2], int n, int col0) {
      float c[128 / 2];
      zeroed_for_wgmma(c);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n128k16_ss(c, smem_desc_sw128(q_main + kk * 32), smem_desc_sw128(table + kk * 32),
                            1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(c);
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const int cell = own[r] + n - 1 - (8 * j + 2 * t + (e & 1));
          if (cell >= 0 && cell < n)
            st_shared_u16(bias_row[r] + 2 * (col0 + cell),
                          __bfloat16_as_ushort(__float2bfloat16(c[4 * j + e] * args.inv_scale)));
        }
    };
    products(k_tile(kStages - 2), cell_y, args.hn, 0);
    products(k_tile(kStages - 1), cell_x, args.wn, kMaxHopperRelGrid);
    // Both warpgroups are past their reads of the tables (and each warp
    // reads back only the rows it wrote): the stages go to their tiles.
    __syncthreads();
    if (tid == 0)
      for (int tile = first_tiles; tile < min(kStages, item.n_tma); ++tile) issue_kv(tile);
  }
  // S of a tile starting at key0 before Q K^T: zero, or the bias of each key.
  auto seed_s = [&](float(&s)[kBlockN / 2], int key0) {
    if constexpr (kBias == 0) {
      zeroed_for_wgmma(s);
    } else {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
        for (int c = 0; c < (kBias == 2 ? 1 : 2); ++c) {
          // Keys past the end (copied tiles of short sequences) read cell 0:
          // the softmax masks them.
          int key = key0 + 8 * j + 2 * t + c;
          key = key < len ? key : 0;
          // key / wn without an integer division: (key + 0.5) / wn is at
          // least 0.5 / wn from an integer, far above fp32's error here.
          const int ky = __float2int_rz((static_cast<float>(key) + 0.5f) * args.inv_wn);
          const int kx = key - ky * args.wn;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const float h = bf16_bits_to_float(ld_shared_u16(bias_row[r] + 2 * ky));
            const uint32_t at = bias_row[r] + 2 * (kMaxHopperRelGrid + kx);
            if constexpr (kBias == 2) {  // kx even, kx + 1 in the same row
              const uint32_t w = ld_shared_u32(at);
              s[4 * j + 2 * r] = h + bf16_bits_to_float(w & 0xffffu);
              s[4 * j + 2 * r + 1] = h + bf16_bits_to_float(w >> 16);
            } else {
              s[4 * j + 2 * r + c] = h + bf16_bits_to_float(ld_shared_u16(at));
            }
          }
        }
      }
      fence_registers(s);
    }
  };

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
    // An end-aligned last tile starts before it * kBlockN: the keys below
    // that, which the tile before covered, are masked.
    const int key0 = by_tma ? item.key0(it) : it * kBlockN;
    float s[kBlockN / 2];
    if constexpr (kBias > 0) seed_s(s, key0);  // its shared-memory reads overlap the wait
    if (!by_tma) {
      // A partial tile of a sequence shorter than a box (or any partial
      // tile, without end-aligned tails): the sequence's last. Its stage was
      // last filled for tile it - kStages, whose products every warp has
      // finished once all are past this barrier; no TMA is ever issued into
      // it again.
      __syncthreads();
      copy_rows(k_tile(stage), k_base, args.kv_stride, it * kBlockN, kBlockN);
      copy_rows(v_tile(stage), v_base, args.kv_stride, it * kBlockN, kBlockN);
      cp_async_commit();
      cp_async_wait<0>();
      fence_async_shared();
      __syncthreads();
    } else {
      mbarrier_wait(full_k(stage), parity);
    }
    if constexpr (kBias == 0) seed_s(s, key0);
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
    if (online_softmax<kBlockN, kLazy>(s, key0, len, args.scale_log2, t, row_max, row_sum, p, alpha,
                                       kRescaleSlack, it * kBlockN))
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
  store_warp_rows<kDPad / 8, kStageStride>(
      reinterpret_cast<const float(&)[kDPad / 8][4]>(o), row_sum, stage, lane, warp_row0, len,
      head_dim / 8, args.out + static_cast<int64_t>(start) * args.out_stride + head * head_dim,
      args.out_stride, item.q0);
#else
  (void)map_q_main, (void)map_q_tail, (void)map_k_main, (void)map_k_tail, (void)map_v_main,
      (void)map_v_tail, (void)args;
  __trap();
#endif
}

// One of q, k or v of every head (y: `heads` slots of head_dim columns) over
// the token rows (z, row_stride elements apart), read in boxes of `rows`
// tokens by `cols` columns from column 0 or 64, swizzled by the box's row
// width; zeros past head_dim. The extent in tokens is every token an int32
// can name: sequences start anywhere (a plugin passes cu_seqlens + first for
// one bucket of a batch), and TMA reads only boxes inside a sequence, never
// rows past the buffer's end.
int encode_rows(CUtensorMap* map, const bf16* rows_base, int heads, int head_dim,
                int64_t row_stride, int cols, int rows) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              cuuint64_t{0x7fffffff}};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * sizeof(bf16),
                                 static_cast<cuuint64_t>(row_stride) * sizeof(bf16)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(cols), 1, static_cast<cuuint32_t>(rows)};
  const CUtensorMapSwizzle swizzle = cols == 16   ? CU_TENSOR_MAP_SWIZZLE_32B
                                     : cols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                  : CU_TENSOR_MAP_SWIZZLE_128B;
  return detail::encode_bf16_tiled(map, rows_base, 3, dims, strides, box, swizzle,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

// The launch's Args from packed qkv or from the extras.
Args make_args(const AttentionParams& p, int m_blocks) {
  Args a{};
  a.m_blocks = m_blocks;
  a.num_heads = p.num_heads;
  a.head_dim = p.head_dim;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  a.out = p.out;
  a.seq_len = p.max_seqlen;
  a.seqs_per_view = 1;
  const int64_t width = int64_t{p.num_heads} * p.head_dim;
  if (p.extras == nullptr) {
    a.cu_seqlens = p.cu_seqlens;
    a.group = 1;
    a.q = p.qkv;
    a.k = p.qkv + width;
    a.v = p.qkv + 2 * width;
    a.q_stride = a.kv_stride = 3 * width;
    a.out_stride = width;
    return a;
  }
  const AttentionExtras& x = *p.extras;
  a.group = p.num_heads / x.kv_heads;
  a.q = x.q;
  a.k = x.k;
  a.v = x.v;
  a.q_stride = x.q_stride;
  a.kv_stride = x.kv_stride;
  a.out_stride = x.out_stride;
  a.rel_h = x.rel_h;
  a.rel_w = x.rel_w;
  a.hn = x.hn;
  a.wn = x.wn;
  a.inv_wn = x.wn > 0 ? 1.0f / static_cast<float>(x.wn) : 0.0f;
  a.inv_scale = 1.0f / p.scale;
  a.view_count = x.view_count;
  a.seqs_per_view = x.seqs_per_view;
  return a;
}

template <int kDPad, bool kLazy, bool kExtras, int kBias>
int launch(const AttentionParams& p) {
  using G = Geometry<kDPad>;
  const int m_blocks = (p.max_seqlen + kBlockM - 1) / kBlockM;
  const Args a = make_args(p, m_blocks);
  static_assert(kBias == 0 || kExtras, "the bias comes with the extras");
  const int kv_heads = p.extras ? p.extras->kv_heads : p.num_heads;
  const int tail = G::kTail > 0 ? G::kTail : 64;  // unused when there is no tail part
  CUtensorMap maps[6];                            // q, k, v: main part, tail part
  const bf16* bases[3] = {a.q, a.k, a.v};
  const int64_t strides[3] = {a.q_stride, a.kv_stride, a.kv_stride};
  for (int m = 0; m < 3; ++m) {
    const int heads = m == 0 ? p.num_heads : kv_heads;
    const int rows = m == 0 ? kBlockM : kBlockN;
    if (const int err =
            encode_rows(&maps[2 * m], bases[m], heads, p.head_dim, strides[m], 64, rows))
      return err;
    if (const int err =
            encode_rows(&maps[2 * m + 1], bases[m], heads, p.head_dim, strides[m], tail, rows))
      return err;
  }
  auto* kernel = tma_attention_kernel<kDPad, kLazy, kExtras, kBias>;
  constexpr size_t kSmem = G::kSmem + (kBias > 0 ? kBiasBytes : 0);
  const int opt_in = detail::opt_in_dynamic_smem(kernel, kSmem);
  if (opt_in != 0) return opt_in;
  const int64_t blocks = static_cast<int64_t>(p.max_seqs) * m_blocks * p.num_heads;
  ENCODER_KIT_REQUIRE(blocks <= int64_t{0x7fffffff});
  return detail::launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmem,
                               p.stream, maps[0], maps[1], maps[2], maps[3], maps[4], maps[5], a);
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
        cudaFuncGetAttributes(&attr, tma_attention_kernel<80, true, false, 0>) == cudaSuccess &&
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
    return launch<d, (d <= 96), false, 0>(p);
  };
  // The extras take head_dim 64 (hopper_takes_extras): the bias by key or by
  // pair of keys.
  if (p.extras != nullptr) {
    const AttentionExtras& x = *p.extras;
    if (x.rel_h == nullptr) return launch<64, true, true, 0>(p);
    return x.wn % 2 == 0 ? launch<64, true, true, 2>(p) : launch<64, true, true, 1>(p);
  }
  if (p.head_dim <= 64) return go(std::integral_constant<int, 64>{});
  if (p.head_dim <= 80) return go(std::integral_constant<int, 80>{});
  if (p.head_dim <= 96) return go(std::integral_constant<int, 96>{});
  return go(std::integral_constant<int, 128>{});
}

}  // namespace detail
}  // namespace encoder_kit::cuda
