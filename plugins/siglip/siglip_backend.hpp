// Where the tower runs: the CPU forward over f32 weights, or the CUDA model
// when the plugin is built with its kernels. One type, so the plugin's model
// class holds no device branches and no #ifdef.
#pragma once

#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace siglip {

class CudaModel;

// The devices this build can run on (the plugin's identity).
#ifdef SIGLIP_HAVE_CUDA
inline constexpr uint32_t kDevices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
inline constexpr uint32_t kDevices = EG_DEVICE_CPU;
#endif

class Backend {
 public:
  // Loads the weights (`weights`: a checkpoint path, or "" / "random") onto
  // `device`, logging what was loaded; `largest`: the largest graph's
  // capacity, which the CUDA model plans its products for. Throws
  // Error(UNSUPPORTED) for CUDA in a build without the kernels.
  Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
          const Capacity& largest);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  size_t workspace_bytes(const Capacity& cap) const;
  // `buffers` in Buffer order; `tune`: the CUDA products time their
  // algorithms at this size first (the graph path's warm-ups ask for it).
  void forward(const Capacity& cap, const eg_tensor* buffers, const OutputPtrs& outputs,
               void* workspace, size_t workspace_bytes, void* stream, bool tune);

 private:
  const Options& opt_;
  Weights cpu_weights_;              // CPU instances
  std::unique_ptr<CudaModel> cuda_;  // CUDA instances
};

}  // namespace siglip
