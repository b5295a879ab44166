// Error plumbing shared by the kernel sources: every failure returns a code and
// leaves the failing expression, file and line for last_error_detail().
#pragma once

#include "kernels.hpp"

#include <cstdint>

namespace encoder_kit::cuda::detail {

// Records "expr at file:line" for this thread and returns code unchanged.
int record_failure(int code, const char* expr, const char* file, int line);

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// varlen_attention_bf16 with the block width forced (4 or 8 warps of 16 query
// rows): the public entry picks by max_seqlen; the benchmark compares both.
// heads_first orders the grid's blocks heads fastest (the blocks running
// together read the same tokens' rows), else query blocks fastest (the former
// order); the public entries take heads first unless
// ENCGRAPH_ATTENTION_HEADS_FIRST is "0" (the A/B switch; read once by
// attention_heads_first_enabled()).
int varlen_attention_bf16_warps(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                                int warps, bool heads_first, cudaStream_t stream);
// varlen_attention_rotary_bf16 with its grid forced: the order, as above, and
// the heads a block walks with one load of its window's cos/sin rows (a
// divisor of num_heads; 0 lets the launch pick from the block count, as the
// public entry does with heads first; it runs one a block otherwise).
int varlen_attention_rotary_bf16_grid(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                      int max_seqlen, int num_heads, int head_dim, float scale,
                                      const float* cos, const float* sin, int64_t cs_stride,
                                      bf16* out, bool heads_first, int heads_per_block,
                                      cudaStream_t stream);
bool attention_heads_first_enabled();
// The heads a block of the fused rotary form walks when the launch picks
// (heads_per_block 0): the most, as a power of two up to 16 dividing
// num_heads, that leave 16 blocks a multiprocessor for the call's (window
// slot, head) pairs; 1 when multiprocessors is unknown (0).
int rotary_heads_per_block(int64_t pairs, int num_heads, int multiprocessors);

// The Hopper kernel (attention_sm90.cu: wgmma, sm_90a): whether it runs on the
// current device (compute capability 9.0 and the sm_90a code present), and
// the kernel itself in one of kSm90AttentionVariants configurations (0, the
// default before the TMA ring, and the ones it was chosen against;
// sm90_attention_variant_name says which). The public entry uses variant 3
// (0, 4, 5 or 6 for the A/B switches, below) for sequences over 64 when
// supported; the benchmark and the tests call every variant to compare.
inline constexpr int kSm90AttentionVariants = 7;
const char* sm90_attention_variant_name(int variant);
bool sm90_attention_supported();
int varlen_attention_bf16_sm90(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                               int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                               int variant, cudaStream_t stream);
// Variants 3 to 6 (attention_sm90_tma.cu): K and V tiles by TMA into a ring
// of stages; they need the driver's cuTensorMapEncodeTiled besides. Variant 3
// runs a sequence's heads and query blocks together (sequence-major grid) and
// stores O by 16-byte chunks staged in shared memory; 6 is the former grid
// (query blocks fastest, one head a grid row) with 4-byte stores from
// registers, the public entry's pick when ENCGRAPH_ATTENTION_HEADS_FIRST is
// "0".
// The public entry picks one of 3 to 6 where supported unless ENCGRAPH_ATTENTION_TMA is "0"
// (the A/B switch: variant 0 then), which tma_attention_enabled() reads once.
bool sm90_tma_attention_supported();
bool tma_attention_enabled();
// Variant 3 moves each row's running max lazily (online_softmax's slack: O is
// rescaled only when a score rises 2^8 above it) below head_dim 128. Variant 4
// is the same kernel compiled to move it every tile, as variants 0-2 and
// head_dim 128 do; the public entry picks it when
// ENCGRAPH_ATTENTION_LAZY_RESCALE is "0" (the A/B switch; read once).
bool lazy_rescale_enabled();
// Variants 3 and 4 read a sequence's last, partial key tile and the query
// block at its end by TMA as the sequence's last 64 and 128 rows
// (end-aligned). Variant 5 is the former form, variant 3 with those tails
// copied by cp.async behind block barriers; the public entry picks it when
// ENCGRAPH_ATTENTION_END_ALIGNED is "0" (the A/B switch; read once).
bool end_aligned_tails_enabled();

// The Hopper matrix product (gemm_sm90.cu: TMA, wgmma, sm_90a): whether it
// runs on the current device (sm90_attention_supported() and a driver with
// cuTensorMapEncodeTiled), and its plain form C = A W^T (+ bias) (+ residual),
// which GemmPlan times beside cuBLASLt's algorithms, the benchmark sets
// against cuBLASLt and the tests against a reference. n a multiple of 8, k a
// multiple of 8, A, W, C and residual 16-byte aligned; residual has C's shape
// and may be C. splits: blocks a tile's k range is shared by (1, 2, 4 or 8;
// 0 picks from the sizes, as gate_up_silu_mul_bf16 does).
bool sm90_gemm_supported();
int gemm_sm90_bf16(const bf16* a, const bf16* w, const bf16* bias, const bf16* residual, bf16* c,
                   int64_t rows, int64_t n, int64_t k, int splits, cudaStream_t stream);
// The splits 0 picks for a rows x n x k product: the most (8, 4 or 2) that keep
// every tile's cluster in one wave with two 64-deep k-blocks or more a block,
// else 1. Fewer splits (powers of two) are the other forms worth timing.
int gemm_sm90_auto_splits(int64_t rows, int64_t n, int64_t k);

// Whether the kit's kernels launch with Programmatic Dependent Launch on the
// current device (cuda/launch.cuh): compute capability 9.0 or later.
bool pdl_enabled();

}  // namespace encoder_kit::cuda::detail

#define ENCODER_KIT_CUDA_TRY(expr)                                                              \
  do {                                                                                          \
    const cudaError_t encoder_kit_status_ = (expr);                                             \
    if (encoder_kit_status_ != cudaSuccess)                                                     \
      return ::encoder_kit::cuda::detail::record_failure(static_cast<int>(encoder_kit_status_), \
                                                         #expr, __FILE__, __LINE__);            \
  } while (0)

#define ENCODER_KIT_CUBLAS_TRY(expr)                                                            \
  do {                                                                                          \
    const cublasStatus_t encoder_kit_status_ = (expr);                                          \
    if (encoder_kit_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      return ::encoder_kit::cuda::detail::record_failure(                                       \
          ::encoder_kit::cuda::kCublasErrorBase + static_cast<int>(encoder_kit_status_), #expr, \
          __FILE__, __LINE__);                                                                  \
  } while (0)

// A bad argument is reported as cudaErrorInvalidValue naming the broken rule.
#define ENCODER_KIT_REQUIRE(cond)                                                                 \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      return ::encoder_kit::cuda::detail::record_failure(static_cast<int>(cudaErrorInvalidValue), \
                                                         #cond, __FILE__, __LINE__);              \
  } while (0)

// After a launch: a bad configuration shows up here, not at the <<< >>>.
#define ENCODER_KIT_LAUNCH_CHECK() ENCODER_KIT_CUDA_TRY(cudaGetLastError())
