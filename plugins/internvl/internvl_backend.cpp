#include "internvl_backend.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>

#include <encgraph/sdk/host.hpp>

#include <utility>

#ifdef INTERNVL_HAVE_CUDA
#include "internvl_cuda_model.hpp"
#else
namespace internvl {
class CudaModel {};  // never made: CUDA is refused in the constructor
}  // namespace internvl
#endif

namespace internvl {

Backend::Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
                 const Capacity& largest)
    : opt_(o) {
#ifndef INTERNVL_HAVE_CUDA
  if (device == EG_DEVICE_CUDA)
    encoder_kit::fail(EG_ERR_UNSUPPORTED,
                      "internvl was built without its CUDA kernels; use device = \"cpu\"");
  (void)device_index;
  (void)largest;
#endif
  const ModelConfig& c = o.model;
  const encoder_kit::WeightSource source(weights.empty() ? "random" : weights, o.seed,
                                         o.check_finite);
  encgraph::sdk::host().info(
      "loading " + source.description() + " (" + std::to_string(c.layers_to_run()) + " of " +
      std::to_string(c.num_hidden_layers) + " layers, hidden " + std::to_string(c.hidden_size) +
      ", " + std::to_string(c.rows_per_tile()) + " tokens per tile)");
  Weights w =
      encoder_kit::naming_config_on_failure(o.config_path, [&] { return load_weights(o, source); });
  if (device == EG_DEVICE_CPU) {
    cpu_weights_ = std::move(w);
    return;
  }
#ifdef INTERNVL_HAVE_CUDA
  cuda_ = std::make_unique<CudaModel>(
      o, w, device_index, largest, o.tune_gemm ? o.tuning_cache : std::string("off"),
      [](const std::string& message) { encgraph::sdk::host().warn(message); });
#endif
}

Backend::~Backend() = default;

size_t Backend::workspace_bytes(const Capacity& cap) const {
#ifdef INTERNVL_HAVE_CUDA
  if (cuda_) return cuda_->workspace_bytes(cap);
#endif
  return cpu_workspace_bytes(opt_, cap);
}

void Backend::forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
                      size_t workspace_bytes, void* stream, bool tune) {
#ifdef INTERNVL_HAVE_CUDA
  if (cuda_) {
    cuda_->forward(cap, buffers, output, workspace, workspace_bytes, stream, tune);
    return;
  }
#endif
  (void)stream;
  (void)tune;
  cpu_forward(opt_, cpu_weights_, cap, buffers, static_cast<float*>(output), workspace,
              workspace_bytes);
}

}  // namespace internvl
