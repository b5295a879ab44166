// The encoder on CUDA in bf16 (f32 accumulation): plugins/siglip's CUDA tower
// on the graph's first two buffers, the projector's two products (GELU fused
// into the first) from the kit, and the packing's weighted gather
// (llava_kernels.hpp). Graph-safe: no allocation or synchronisation inside
// forward() while the stream is capturing.
#pragma once

#include "llava_batch.hpp"
#include "llava_config.hpp"
#include "llava_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace llava_onevision {

class CudaModel {
 public:
  // Uploads the weights as bf16 to device `device_index` and plans the
  // products for up to `max` tiles (more are planned on demand, outside capture).
  CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
            const std::string& tuning_cache = "off",
            std::function<void(const std::string&)> warn = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;

  // `buffers` in Buffer order; writes [cap.out_rows, text_hidden_size] bf16.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llava_onevision
