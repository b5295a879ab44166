// The GEMM tuning cache of one CUDA device: an encoder_kit::TuningCache whose
// context names what a stored cuBLASLt algorithm is valid for (its opaque data
// means something only to the same cuBLASLt build on the same GPU): the GPU's
// name, compute capability and SM count, the CUDA runtime and cuBLASLt
// versions, and the encgraph version. GemmPlan::set_tuning_cache takes it.
#pragma once

#include <encoder_kit/tuning_cache.hpp>

#include <memory>
#include <string>

namespace encoder_kit::cuda {

// "gpu=<name>;cc=<major>.<minor>;sms=<n>;cudart=<v>;cublaslt=<v>;encgraph=<v>"
// for `device`; "" when the device cannot be queried.
std::string gemm_tuning_context(int device);

// The cache for `device` in `folder` ("" or a device that cannot be queried:
// nullptr, no cache), already loaded; problems go to `warn`.
std::shared_ptr<TuningCache> open_gemm_tuning_cache(int device, const std::string& folder,
                                                    TuningWarn warn);

// What a model plugin's CUDA model opens: `setting` is its tuning_cache key
// (a folder, "off", or "" for the default: tuning_cache_dir); without `warn`,
// problems go to stderr as "<who>: warning: ...".
std::shared_ptr<TuningCache> open_plugin_gemm_tuning_cache(int device, const std::string& setting,
                                                           const std::string& who, TuningWarn warn);

}  // namespace encoder_kit::cuda
