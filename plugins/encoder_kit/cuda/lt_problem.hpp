// cuBLASLt's per-call descriptors of one product in stack storage
// (cublasLt*Init on the opaque structs): no allocation, nothing shared
// between threads. GemmPlan and Fp8GemmPlan build one per call.
#pragma once

#include <cublasLt.h>

#include <vector>

namespace encoder_kit::cuda::detail {

struct LtProblem {
  cublasLtMatmulDescOpaque_t desc_storage;
  cublasLtMatrixLayoutOpaque_t w_storage, a_storage, c_storage;
  cublasLtMatmulDesc_t desc() { return &desc_storage; }
  cublasLtMatrixLayout_t w() { return &w_storage; }
  cublasLtMatrixLayout_t a() { return &a_storage; }
  cublasLtMatrixLayout_t c() { return &c_storage; }
};

// The index of the fastest form in `best_ms` (FormTimes: -1 for a form that
// failed), or -1 when all failed. The first form (the heuristic's own
// choice) stays unless another is clearly faster, by more than 5%: a timing
// win of a few percent in a short search is often noise.
inline int fastest_keeping_first(const std::vector<float>& best_ms) {
  int best = -1;
  for (size_t i = 0; i < best_ms.size(); ++i)
    if (best_ms[i] >= 0.0f && (best < 0 || best_ms[i] < best_ms[static_cast<size_t>(best)]))
      best = static_cast<int>(i);
  if (best > 0 && best_ms[0] >= 0.0f && best_ms[static_cast<size_t>(best)] > 0.95f * best_ms[0])
    best = 0;
  return best;
}

}  // namespace encoder_kit::cuda::detail
