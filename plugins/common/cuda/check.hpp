// Error plumbing shared by the kernel sources: every failure returns a code and
// leaves the failing expression, file and line for last_error_detail().
#pragma once

#include "kernels.hpp"

#include <cstdint>

namespace egk::cuda::detail {

// Records "expr at file:line" for this thread and returns code unchanged.
int record_failure(int code, const char* expr, const char* file, int line);

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// varlen_attention_bf16 with the block width forced (4 or 8 warps of 16 query
// rows): the public entry picks by max_seqlen; the benchmark compares both.
int varlen_attention_bf16_warps(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                                int warps, cudaStream_t stream);

}  // namespace egk::cuda::detail

#define EGK_CUDA_TRY(expr)                                                                       \
  do {                                                                                           \
    const cudaError_t egk_status_ = (expr);                                                      \
    if (egk_status_ != cudaSuccess)                                                              \
      return ::egk::cuda::detail::record_failure(static_cast<int>(egk_status_), #expr, __FILE__, \
                                                 __LINE__);                                      \
  } while (0)

#define EGK_CUBLAS_TRY(expr)                                                              \
  do {                                                                                    \
    const cublasStatus_t egk_status_ = (expr);                                            \
    if (egk_status_ != CUBLAS_STATUS_SUCCESS)                                             \
      return ::egk::cuda::detail::record_failure(                                         \
          ::egk::cuda::kCublasErrorBase + static_cast<int>(egk_status_), #expr, __FILE__, \
          __LINE__);                                                                      \
  } while (0)

// A bad argument is reported as cudaErrorInvalidValue naming the broken rule.
#define EGK_REQUIRE(cond)                                                                        \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      return ::egk::cuda::detail::record_failure(static_cast<int>(cudaErrorInvalidValue), #cond, \
                                                 __FILE__, __LINE__);                            \
  } while (0)

// After a launch: a bad configuration shows up here, not at the <<< >>>.
#define EGK_LAUNCH_CHECK() EGK_CUDA_TRY(cudaGetLastError())
