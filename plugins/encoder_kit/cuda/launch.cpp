// pdl_enabled() (launch.cuh): per device, once.
// current_multiprocessors() (launch.cuh): asked every call.
#include <encoder_kit/cuda/check.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <mutex>
#include <utility>

namespace encoder_kit::cuda::detail {

int current_multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

bool pdl_enabled() {
  // Per device: 0 unknown, 1 no, 2 yes; devices past the table are asked every time.
  static std::atomic<int> known[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  auto ask = [device] {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 1;
    }
    return major >= 9 ? 2 : 1;
  };
  if (device < 0 || device >= 64) return ask() == 2;
  int k = known[device].load(std::memory_order_relaxed);
  if (k == 0) {
    k = ask();
    known[device].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

bool kernel_waits_for_prior_grid(const void* kernel) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> known;  // (device, kernel)
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(device, kernel);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  cudaFuncAttributes attr{};
  bool waits = false;
  if (cudaFuncGetAttributes(&attr, kernel) == cudaSuccess)
    waits = attr.ptxVersion >= 90;  // the wait exists from PTX for 9.0 on
  else
    (void)cudaGetLastError();  // the launch itself will report it
  known.emplace(key, waits);
  return waits;
}

}  // namespace encoder_kit::cuda::detail
