// Dynamic shared memory above 48 KiB needs an opt-in, once per kernel and
// device: the attribute belongs to the device current when it is set, and one
// process runs on several (data parallel). Not a stream operation, so also
// legal while a graph is being captured.
#pragma once

#include <encoder_kit/cuda/check.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <utility>

namespace encoder_kit::cuda::detail {

template <typename Kernel>
int opt_in_dynamic_smem(Kernel* kernel, size_t bytes) {
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> opted;  // (device, kernel)
  int device = 0;
  ENCODER_KIT_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device, reinterpret_cast<const void*>(kernel));
  if (opted.count(key)) return 0;
  ENCODER_KIT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  opted.insert(key);
  return 0;
}

}  // namespace encoder_kit::cuda::detail
