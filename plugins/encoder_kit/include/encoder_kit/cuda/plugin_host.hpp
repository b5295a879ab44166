// Host-side helpers of the model plugins' CUDA paths: workspace carving and
// turning failed CUDA calls into encoder_kit::Error. Header-only, and only for
// targets that link the plugin kit (encgraph_encoder_kit, for
// encoder_kit/error.hpp) besides encgraph_encoder_kit_cuda; the kernel sources
// report through check.hpp instead. No copy helpers: capture inputs are
// host-staged (ABI 1.1), so a plugin's capture path holds no device copies.
#pragma once

#include "kernels.hpp"

#include <encoder_kit/error.hpp>

#include <cstddef>
#include <string>

namespace encoder_kit::cuda {

// Buffers carved from one workspace start on this boundary, as a separate
// cudaMalloc of each would.
inline constexpr size_t kWorkspaceAlign = 256;

inline size_t align_up(size_t n) {
  return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Throws for a failed kit call (a kernels.hpp status): OUT_OF_MEMORY for an
// allocation, DEVICE otherwise; `who` (e.g. "siglip CUDA") leads the message.
inline void throw_on_kit_failure(const char* who, int rc, const char* what) {
  if (rc != 0)
    encoder_kit::fail(rc == cudaErrorMemoryAllocation ? EG_ERR_OUT_OF_MEMORY : EG_ERR_DEVICE,
                      std::string(who) + ": " + what + ": " + error_string(rc) + " (" +
                          last_error_detail() + ")");
}

// The same for a CUDA runtime call.
inline void throw_on_cuda_error(const char* who, cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    encoder_kit::fail(e == cudaErrorMemoryAllocation ? EG_ERR_OUT_OF_MEMORY : EG_ERR_DEVICE,
                      std::string(who) + ": " + what + ": " + cudaGetErrorString(e));
}

}  // namespace encoder_kit::cuda
