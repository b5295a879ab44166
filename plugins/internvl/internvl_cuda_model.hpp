// The encoder's forward on CUDA in bf16 (fp32 accumulation): the kit's
// pre-norm layers (encoder_kit/cuda/prenorm_layers.hpp; with precision =
// "fp8_linear" their q/k/v, fc1 and fc2 in FP8), its products and
// variable-length flash attention, plus the two kernels of internvl_kernels.hpp. Graph-safe: no
// allocation or synchronisation inside forward() while the stream is capturing.
#pragma once

#include "internvl_batch.hpp"
#include "internvl_config.hpp"
#include "internvl_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace internvl {

class CudaModel {
 public:
  // Uploads the weights (bf16, and e4m3 for FP8's products) to device `device_index` and plans the
  // products for up to `max` tiles (more are planned on demand, outside
  // capture). Throws Error(INVALID_ARGUMENT) for sizes the kernels refuse.
  CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
            const std::string& tuning_cache = "off",
            std::function<void(const std::string&)> warn = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;
  // `buffers` in Buffer order; output [cap.out_rows, text_hidden_size] bf16.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace internvl
