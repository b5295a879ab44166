// The attention family: one parameter struct, one dispatch by architecture
// and shape over a few compiled instances (FlashAttention's pattern). The
// instances, each its own tests' float64 reference:
//  - Hopper (attention_sm90_tma.cu, sm_90a): K and V by TMA into a ring of
//    stages, wgmma products, two warpgroups of 64 queries, the running max
//    moved lazily below head_dim 128, a sequence's partial tiles read as its
//    last rows, a sequence-major grid;
//  - Warps (attention.cu, sm80+): mma.sync, 4 or 8 warps of 16 queries,
//    cp.async tiles, heads fastest in the grid;
//  - WarpsRotary: the 4-warp form with rotary_bf16's rotation applied to Q
//    and K in shared memory (sequences of up to 64 tokens: Qwen's windows);
//  - Warps4 with AttentionExtras: the 4-warp form over separate q/k/v rows,
//    grouped KV heads, a prefix mask and the SAM's decomposed
//    relative-position bias (DeepSeek-OCR-2), as compile-time features of the
//    same kernel: the plain instances do not carry them;
//  - Hopper with AttentionExtras (hopper_takes_extras): the same layouts,
//    grouped KV heads and bias at head_dim 64 up to a 64 x 64 grid, no prefix
//    mask; the bias products on the tensor cores, seeding each tile's S.
// Plain C++: included by .cpp files compiled by the host compiler.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit::cuda {

// The layout and inputs beyond the packed form (AttentionParams::extras):
// sequences of equal length max_seqlen, sequence s being rows
// [s * max_seqlen, (s + 1) * max_seqlen) of q, k and v (cu_seqlens unused,
// nullptr); max_seqs sequences, num_heads query heads.
// out[row * out_stride + h * head_dim + d] = softmax(scale q.k + bias) v, where
// query head h reads key/value head h / (num_heads / kv_heads).
//  - prefix > 0 (a prefix mask): query row i sees keys j < prefix when
//    i < prefix, else keys j <= i; prefix == 0: every key of the sequence.
//  - rel_h / rel_w (both or neither): the SAM's decomposed relative positions
//    over the sequence as an hn x wn grid (hn * wn == max_seqlen, both at most
//    kMaxRelGrid). The tables are get_rel_pos's, already resized: bf16
//    [2 hn - 1, head_dim] and [2 wn - 1, head_dim], rows zero-padded to a
//    multiple of 8, 16-byte aligned. Query cell (qy, qx) and key cell (ky, kx)
//    add the unscaled q . rel_h[qy - ky + hn - 1] + q . rel_w[qx - kx + wn - 1]
//    to the logit, computed inside the kernel. Not with a prefix mask.
//  - view_count (device int32, may be null): sequences at or past
//    view_count * seqs_per_view are padding and skipped (rows unwritten).
// head_dim a multiple of 8 up to 64; q/k/v and their strides 16-byte aligned
// (strides in elements, multiples of 8).
constexpr int kMaxRelGrid = 128;  // bounds the shared memory of the bias products
constexpr int kMaxHopperRelGrid = 64;  // the Hopper instance's: one m64n128 product a table
struct AttentionExtras {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  int64_t q_stride = 0, kv_stride = 0, out_stride = 0;
  int kv_heads = 0;  // a divisor of num_heads
  int prefix = 0;
  const __nv_bfloat16* rel_h = nullptr;
  const __nv_bfloat16* rel_w = nullptr;
  int hn = 0, wn = 0;
  const int32_t* view_count = nullptr;
  int seqs_per_view = 1;
};

// Variable-length attention over a packed qkv[tokens, 3, num_heads,
// head_dim]: sequence s covers tokens cu_seqlens[s] .. cu_seqlens[s+1]-1 and
// attends to itself only (no causal mask); out[t, h*head_dim + d] =
// softmax(q k^T * scale) v, q and k rotated first when a rotary table is given.
struct AttentionParams {
  const __nv_bfloat16* qkv = nullptr;  // 16-byte aligned
  // Device int32[max_seqs + 1], non-decreasing, padded by repeating the last
  // value (zero-length sequences cost one early exit).
  const int32_t* cu_seqlens = nullptr;
  int max_seqs = 0;
  // An upper bound on every sequence length, fixed at capture; query blocks
  // beyond a sequence's end exit at once.
  int max_seqlen = 0;
  int num_heads = 0;  // 1 .. 65535
  int head_dim = 0;   // a multiple of 8, at most 128 (padded inside to 64/80/96/128)
  float scale = 0.0f;
  // Rotary fused into the Q and K loads (optional: rotary_cos == nullptr for
  // none), as rotary_bf16(qkv, ..., cos, sin, stride) would rotate them,
  // without writing qkv. fp32 tables, rows indexed by token, 16-byte
  // aligned; stride (floats) a multiple of 4 and >= head_dim / 2. Only for
  // max_seqlen <= 64: one block holds a whole sequence.
  const float* rotary_cos = nullptr;
  const float* rotary_sin = nullptr;
  int64_t rotary_stride = 0;
  // The rotary form's heads a block walks with one load of its sequence's
  // cos/sin rows: 0 picks from the grid (detail::rotary_heads_per_block), else
  // a divisor of num_heads (the tests and the benchmark force it).
  int rotary_heads_per_block = 0;
  // Rows outside every sequence are not written. 16-byte aligned.
  __nv_bfloat16* out = nullptr;
  cudaStream_t stream = nullptr;
  // Optional: separate q/k/v, grouped KV heads, a mask, a bias (above); then
  // qkv and cu_seqlens are nullptr, and Warps4 takes it, Hopper where
  // hopper_takes_extras says so.
  const AttentionExtras* extras = nullptr;
};

// The compiled instances run_attention chooses from.
enum class AttentionKernel {
  Hopper,       // TMA + wgmma (compute capability 9.0 with the sm_90a code and a driver
                // that encodes tensor maps)
  Warps4,       // mma.sync, 64 queries a block
  Warps8,       // mma.sync, 128 queries a block
  WarpsRotary,  // mma.sync, 64 queries a block, rotary fused
};
const char* attention_kernel_name(AttentionKernel kernel);

// Whether the Hopper instance takes p's extras: head_dim at most 64, no prefix
// mask, a bias grid of at most kMaxHopperRelGrid a side, and every row of
// the max_seqs x max_seqlen layout an int32 (whether it runs on this device is
// detail::sm90_attention_supported's question).
bool hopper_takes_extras(const AttentionParams& p);

// The dispatch: the rotary form when a table is given; else sequences over 64
// tokens on the Hopper kernel where it runs (with extras, where it takes
// them), and on 8 warps elsewhere (each K/V tile brought into shared memory
// serves 128 queries; with extras, on 4 warps); shorter ones (one tile:
// Qwen's 64-patch windows) on 4 warps, which they fill exactly.
AttentionKernel pick_attention_kernel(const AttentionParams& p);

// Checks p, then runs it on pick_attention_kernel(p). 0 or an error code
// (kernels.hpp's conventions); nothing allocates or synchronises, so it can
// be captured into a graph.
int run_attention(const AttentionParams& p);

// The same on a given instance (tests and benchmark): cudaErrorInvalidValue
// where it cannot take p (Hopper off Hopper, a rotary table given to a plain
// form or missing for the rotary one, extras to Warps8 or the rotary form, or
// to Hopper where it does not take them).
int run_attention(const AttentionParams& p, AttentionKernel kernel);

}  // namespace encoder_kit::cuda
