#include "llava_backend.hpp"

#include <encgraph/sdk/host.hpp>

#include <string>

namespace llava_onevision {

Backend::Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index,
                 const Capacity& largest)
    : opt_(o), device_("llava_onevision", device) {
  const ModelConfig& c = o.model;
  const encoder_kit::WeightSource source(weights.empty() ? "random" : weights, o.seed,
                                         o.check_finite);
  encgraph::sdk::host().info("loading " + source.description() + " (SigLIP tower of " +
                             std::to_string(c.vision.num_hidden_layers) + " layers, hidden " +
                             std::to_string(c.vision.hidden_size) + ", " +
                             std::to_string(c.rows_per_tile()) + " rows per tile; projector to " +
                             std::to_string(c.text_hidden_size) + ")");
  device_.load_onto(device, o, device_index, largest, [&] { return load_weights(o, source); });
}

size_t Backend::workspace_bytes(const Capacity& cap) const {
  return device_.run([&](const Weights& w) { return cpu_workspace_bytes(opt_, w, cap); },
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

}  // namespace llava_onevision
