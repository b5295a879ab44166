// The Qwen3-VL tower's forward on CUDA in bf16 (fp32 accumulation), over the
// kit's kernels (plugins/encoder_kit/cuda/kernels.hpp): cuBLASLt products with
// fused bias, residual add and GELU (tanh in the blocks, erf in the mergers),
// LayerNorm, rotary, variable-length flash attention; plus the interpolated
// position embedding (qwen3_kernels.cu). Graph-safe: every per-batch value is
// read from the graph buffers on the device, and nothing allocates or
// synchronises inside forward() while a stream is capturing.
#pragma once

#include "qwen3_config.hpp"
#include "qwen3_layout.hpp"
#include "qwen3_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace qwen3 {

class CudaModel {
 public:
  // Uploads the weights as bf16 to device `device_index` and plans the matrix
  // products for up to `max_patches` rows (more are planned on demand,
  // outside capture).
  // `tuning_cache` is the plugin key of that name (a folder, "off", or "" for the
  // default folder; see encoder_kit/tuning_cache.hpp); `warn` gets the cache's
  // warnings (stderr when empty).
  CudaModel(const VisionConfig& c, const Weights& w, int device_index, int64_t max_patches,
            const std::string& tuning_cache = "",
            std::function<void(const std::string&)> warn = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;

  // `buffers` in Buffer order. `outputs`: 1 + deepstack count bf16 tensors of
  // [cap.tokens, out_hidden] (the merger's, then deepstack_0..k-1 in the order
  // of deepstack_visual_indexes). With `tune` (the warm-up run before a
  // capture), the products' algorithms are timed for this size first; never
  // while the stream is capturing.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* const* outputs, int num_outputs,
               void* workspace, size_t workspace_bytes, void* stream, bool tune);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qwen3
