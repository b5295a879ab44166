// Error plumbing shared by the kernel sources: every failure returns a code and
// leaves the failing expression, file and line for last_error_detail().
#pragma once

#include "attention.hpp"
#include "kernels.hpp"

#include <cstdint>

namespace encoder_kit::cuda::detail {

// Records "expr at file:line" for this thread and returns code unchanged.
int record_failure(int code, const char* expr, const char* file, int line);

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The heads a block of the fused rotary form walks when the launch picks
// (AttentionParams::rotary_heads_per_block 0): the most, as a power of two up
// to 16 dividing num_heads, that leave 16 blocks a multiprocessor for the
// call's (window slot, head) pairs; 1 when multiprocessors is unknown (0).
int rotary_heads_per_block(int64_t pairs, int num_heads, int multiprocessors);

// Whether the Hopper attention instance (attention_sm90_tma.cu: TMA, wgmma,
// sm_90a) runs on the current device: compute capability 9.0, the sm_90a code
// present, and a driver that encodes tensor maps. Per device, once.
bool sm90_attention_supported();
// That instance on arguments run_attention has checked.
int run_attention_hopper(const AttentionParams& p);

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

// A cuBLASLt handle for heuristic queries and a preference allowing
// GemmPlan::workspace_bytes() of workspace and asking 16-byte alignment of
// every operand (GemmPlan, Fp8GemmPlan). The caller destroys both.
int create_heuristic_query(cublasLtHandle_t& handle, cublasLtMatmulPreference_t& pref);

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
