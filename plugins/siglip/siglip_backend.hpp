// Where the tower runs: the CPU forward over f32 weights, or the CUDA model
// when the plugin is built with its kernels. One type, so the plugin's model
// class holds no device branches and no #ifdef.
#pragma once

#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_weights.hpp"

#include <encoder_kit/device_backend.hpp>

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#ifdef SIGLIP_HAVE_CUDA
#include "siglip_cuda_model.hpp"
#else
namespace siglip {
using CudaModel = encoder_kit::NoCuda;
}  // namespace siglip
#endif

namespace siglip {

// The devices this build can run on (the plugin's identity).
inline constexpr uint32_t kDevices = encoder_kit::kDevicesOf<CudaModel>;

class Backend {
 public:
  // Loads the weights (`weights`: a checkpoint path, or "" / "random") onto
  // `device`, logging what was loaded; `largest`: the largest graph's
  // capacity, which the CUDA model plans its products for. Throws
  // Error(UNSUPPORTED) for CUDA in a build without the kernels.
  Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
          const Capacity& largest);

  size_t workspace_bytes(const Capacity& cap) const;
  // `buffers` in Buffer order; `tune`: the CUDA products time their
  // algorithms at this size first (the graph path's warm-ups ask for it).
  void forward(const Capacity& cap, const eg_tensor* buffers, const OutputPtrs& outputs,
               void* workspace, size_t workspace_bytes, void* stream, bool tune);

 private:
  const Options& opt_;
  encoder_kit::DeviceBackend<Weights, CudaModel> device_;
};

}  // namespace siglip
