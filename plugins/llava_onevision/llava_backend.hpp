// Where the encoder runs: the CPU forward over f32 weights, or the CUDA model
// when the plugin is built with its kernels. One type, so the plugin's model
// class holds no device branches and no #ifdef.
#pragma once

#include "llava_batch.hpp"
#include "llava_config.hpp"
#include "llava_weights.hpp"

#include <encoder_kit/device_backend.hpp>

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <string>

#ifdef LLAVA_HAVE_CUDA
#include "llava_cuda_model.hpp"
#else
namespace llava_onevision {
using CudaModel = encoder_kit::NoCuda;
}  // namespace llava_onevision
#endif

namespace llava_onevision {

inline constexpr uint32_t kDevices = encoder_kit::kDevicesOf<CudaModel>;

class Backend {
 public:
  // Loads the weights (`weights`: a checkpoint path, or "" / "random") onto
  // `device`; `largest`: the largest graph's capacity (the CUDA products are
  // planned for it). Throws Error(UNSUPPORTED) for CUDA in a build without it.
  Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
          const Capacity& largest);

  size_t workspace_bytes(const Capacity& cap) const;
  void forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
               size_t workspace_bytes, void* stream, bool tune);

 private:
  const Options& opt_;
  encoder_kit::DeviceBackend<Weights, CudaModel> device_;
};

}  // namespace llava_onevision
