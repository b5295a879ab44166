#include "internvl_backend.hpp"

#include <encoder_kit/error.hpp>

#include <encgraph/sdk/host.hpp>

#include <utility>

namespace internvl {

Backend::Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
                 const Capacity& largest)
    : opt_(o), device_("internvl", device) {
  const ModelConfig& c = o.model;
  const encoder_kit::WeightSource source(weights.empty() ? "random" : weights, o.seed,
                                         o.check_finite);
  encgraph::sdk::host().info(
      "loading " + source.description() + " (" + std::to_string(c.layers_to_run()) + " of " +
      std::to_string(c.num_hidden_layers) + " layers, hidden " + std::to_string(c.hidden_size) +
      ", " + std::to_string(c.rows_per_tile()) + " tokens per tile)");
  device_.load_onto(device, o, device_index, largest, [&] { return load_weights(o, source); });
}

size_t Backend::workspace_bytes(const Capacity& cap) const {
  return device_.run([&](const Weights&) { return cpu_workspace_bytes(opt_, cap); },
                     [&](const auto& m) { return m.workspace_bytes(cap); });
}

void Backend::forward(const Capacity& cap, const eg_tensor* buffers, void* output, void* workspace,
                      size_t workspace_bytes, void* stream, bool tune) {
  device_.run(
      [&](const Weights& w) {
        cpu_forward(opt_, w, cap, buffers, static_cast<float*>(output), workspace, workspace_bytes);
      },
      [&](auto& m) { m.forward(cap, buffers, output, workspace, workspace_bytes, stream, tune); });
}

}  // namespace internvl
