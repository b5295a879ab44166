// Checked CUDA runtime calls: every failure becomes encgraph::Error(Device) with
// the expression, file and line. RAII owners log instead of throwing.
#pragma once

#include <encgraph/error.hpp>

#include <cuda_runtime.h>
#include <string>

namespace encgraph::cuda_detail {

[[noreturn]] inline void throw_cuda(cudaError_t status, const char* expr, const char* file,
                                    int line) {
  throw Error(ErrorKind::Device, std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                                     cudaGetErrorString(status) + ") in " + expr + " at " + file +
                                     ":" + std::to_string(line));
}

}  // namespace encgraph::cuda_detail

#define EG_CUDA_CHECK(expr)                                                            \
  do {                                                                                 \
    const cudaError_t eg_cuda_status_ = (expr);                                        \
    if (eg_cuda_status_ != cudaSuccess)                                                \
      ::encgraph::cuda_detail::throw_cuda(eg_cuda_status_, #expr, __FILE__, __LINE__); \
  } while (0)
