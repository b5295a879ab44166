// The GEMM tuning cache's context: which GPU and library builds a stored
// cuBLASLt algorithm belongs to (see encoder_kit/cuda/tuning_cache.hpp).
#include <encoder_kit/cuda/tuning_cache.hpp>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>

#ifndef ENCODER_KIT_ENCGRAPH_VERSION
#define ENCODER_KIT_ENCGRAPH_VERSION "unknown"
#endif

namespace encoder_kit::cuda {

std::string gemm_tuning_context(int device) {
  cudaDeviceProp prop{};
  int runtime = 0;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      cudaRuntimeGetVersion(&runtime) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    return {};
  }
  std::string name;
  for (const char* p = prop.name; *p != '\0' && name.size() < 200; ++p)
    name += (*p >= 0x20 && *p <= 0x7e && *p != ';') ? *p : '_';
  return "gpu=" + name + ";cc=" + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
         ";sms=" + std::to_string(prop.multiProcessorCount) + ";cudart=" + std::to_string(runtime) +
         ";cublaslt=" + std::to_string(cublasLtGetVersion()) +
         ";encgraph=" + ENCODER_KIT_ENCGRAPH_VERSION;
}

std::shared_ptr<TuningCache> open_gemm_tuning_cache(int device, const std::string& folder,
                                                    TuningWarn warn) {
  if (folder.empty()) return nullptr;
  const std::string context = gemm_tuning_context(device);
  if (context.empty()) {
    if (warn)
      warn("tuning cache: CUDA device " + std::to_string(device) +
           " cannot be queried; the cache is off");
    return nullptr;
  }
  auto cache = std::make_shared<TuningCache>(folder, "gemm", context, std::move(warn));
  cache->load();
  return cache;
}

std::shared_ptr<TuningCache> open_plugin_gemm_tuning_cache(int device, const std::string& setting,
                                                           const std::string& who,
                                                           TuningWarn warn) {
  if (!warn)
    warn = [who](const std::string& message) {
      std::fprintf(stderr, "%s: warning: %s\n", who.c_str(), message.c_str());
    };
  return open_gemm_tuning_cache(device, tuning_cache_dir(setting), std::move(warn));
}

}  // namespace encoder_kit::cuda
