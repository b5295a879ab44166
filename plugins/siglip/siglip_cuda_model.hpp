// The tower's forward on CUDA in bf16 (fp32 accumulation): cuBLASLt products
// with fused bias, GELU(tanh) and residual epilogues, LayerNorm and
// variable-length flash attention from the kit (plugins/common/cuda), plus the
// two kernels of siglip_kernels.hpp. Graph-safe: no allocation or
// synchronisation inside forward() while the stream is capturing.
#pragma once

#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <memory>

namespace siglip {

// Host-to-device copy on `stream`, waited for (capture preparation only).
void cuda_upload_sync(void* dst, const void* src, size_t bytes, void* stream);
// Stream-ordered memset to zero.
void cuda_zero(void* dst, size_t bytes, void* stream);

class CudaModel {
 public:
  // Uploads the weights as bf16 to device `device_index` and plans the matrix
  // products for up to `max` (more are planned on demand, outside capture).
  CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;

  // `buffers` in Buffer order; `output` [cap.out_rows, hidden] bf16.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
               size_t workspace_bytes, void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace siglip
