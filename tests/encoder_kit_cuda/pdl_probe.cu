#include "pdl_probe.hpp"

namespace encoder_kit_test {
namespace {

__global__ void trigger_then_write(__nv_bfloat16* dst, int64_t n, float value, long long delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  // globaltimer counts nanoseconds whatever the clock: the delay does not
  // depend on the GPU's frequency.
  auto now = [] {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return static_cast<long long>(t);
  };
  const long long t0 = now();
  while (now() - t0 < delay_ns) {
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16(value);
}

}  // namespace

cudaError_t launch_trigger_then_write(__nv_bfloat16* dst, int64_t n, float value, int delay_us,
                                      cudaStream_t stream) {
  // Few blocks: the dependent's blocks find room beside them while they spin.
  trigger_then_write<<<32, 256, 0, stream>>>(dst, n, value, 1000LL * delay_us);
  return cudaGetLastError();
}

}  // namespace encoder_kit_test
