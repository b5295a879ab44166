// The tower's forward on CUDA in bf16 (fp32 accumulation), over the kit's
// kernels (plugins/encoder_kit/cuda/kernels.hpp): cuBLASLt products with fused bias,
// residual add and GELU, the MLP's gate/up product with SiLU-mul in its epilogue
// on Hopper (gemm_sm90.cu; cuBLASLt and a SiLU-mul pass elsewhere or where
// faster), fused RMSNorm, rotary, variable-length flash
// attention and a row gather for the inverse window order. Graph-safe: no
// allocation or synchronisation inside forward() while a stream is capturing.
#pragma once

#include "qwen_config.hpp"
#include "qwen_layout.hpp"
#include "qwen_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace qwen {

class CudaModel {
 public:
  // Uploads the weights as bf16 to device `device_index` and plans the matrix
  // products for up to `max_patches` rows (more are planned on demand,
  // outside capture).
  // `tuning_cache` is the plugin key of that name (a folder, "off", or "" for the
  // default folder; see encoder_kit/tuning_cache.hpp); `warn` gets the cache's
  // warnings (stderr when empty). `mlp_kernel`, `qkv_kernel`: the plugin keys
  // of those names (qwen_config.hpp); a fused form on a GPU without the Hopper
  // kernel is an error.
  CudaModel(const VisionConfig& c, const Weights& w, int device_index, int64_t max_patches,
            const std::string& tuning_cache = "", std::function<void(const std::string&)> warn = {},
            MlpKernel mlp_kernel = MlpKernel::Auto, QkvKernel qkv_kernel = QkvKernel::Auto);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;

  // `buffers` in Buffer order, `output` [cap.tokens, out_hidden] bf16. With
  // `tune` (the warm-up run before a capture), the products' algorithms are
  // timed for this size first; never while the stream is capturing.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qwen
