// Kernel launches with Programmatic Dependent Launch (PDL, compute capability
// 9.0 and later). A kernel launched through launch_kernel() may be scheduled
// while the kernel before it on the stream is still draining its last blocks,
// instead of after that kernel's completion has been signalled and its memory
// flushed: a few microseconds a boundary, which is most of the gap between two
// short kernels (one small image is ~300 launches). Inside a CUDA graph the
// capture turns the attribute into a programmatic edge.
//
// The contract that makes it safe: every kernel launched this way calls
// wait_for_prior_grid() before its first global-memory access, read or write.
// The wait returns once the previous kernel has completed and its writes are
// visible, so results are as with ordinary stream order. Kernels do not trigger
// their dependents early (griddepcontrol.launch_dependents): a waiting block
// would hold a multiprocessor's slots the draining kernel could still use.
// Before compute capability 9.0 kernels launch without the attribute and
// wait_for_prior_grid() returns at once.
#pragma once

#include <encoder_kit/cuda/check.hpp>

#include <cuda_runtime.h>

#include <cstddef>

namespace encoder_kit::cuda::detail {

__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether `kernel` was compiled with the wait: PTX for compute capability
// 9.0+. A build for an older target that a 9.0 GPU runs through the JIT has
// wait_for_prior_grid() compiled out, and must not be launched with PDL
// (launch.cpp; per kernel and device, once).
bool kernel_waits_for_prior_grid(const void* kernel);

// The current device's multiprocessors, asked on every launch (a cheap host
// query, legal during capture: a process may drive GPUs of several kinds); 0
// when unknown.
int current_multiprocessors();

// kernel<<<grid, block, smem, stream>>>(args...) in thread-block clusters of
// cluster_x blocks along x (1: no cluster attribute), with the PDL attribute
// where pdl_enabled() and the kernel waits; the launch error, if any, is
// returned, recorded and cleared (it must not be blamed on a later launch).
template <typename... Params, typename... Args>
int launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                              cudaStream_t stream, unsigned cluster_x, Args... args) {
  cudaLaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (pdl_enabled() && kernel_waits_for_prior_grid(reinterpret_cast<const void*>(kernel))) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster_x > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster_x;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, args...);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return record_failure(static_cast<int>(status), "cudaLaunchKernelEx(kernel)", __FILE__,
                          __LINE__);
  }
  return 0;
}

// The same without clusters: kernel<<<grid, block, smem, stream>>>(args...).
template <typename... Params, typename... Args>
int launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                  cudaStream_t stream, Args... args) {
  return launch_kernel_in_clusters(kernel, grid, block, smem, stream, 1u, args...);
}

}  // namespace encoder_kit::cuda::detail
