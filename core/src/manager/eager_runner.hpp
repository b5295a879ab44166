// Eager runs: one path of one batch run outside any graph at its exact size
// (shape.token_budget = the batch's tokens), in per-path scratch memory that
// grows as needed and is kept for reuse.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"
#include "graph_geometry.hpp"
#include "staging.hpp"

#include <encgraph/runtime_config.hpp>

#include <memory>
#include <vector>

namespace encgraph {

class EagerRunner {
 public:
  EagerRunner(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin,
              const RuntimeConfig& config, const GraphGeometry& geometry, Staging& staging);
  ~EagerRunner();
  EagerRunner(const EagerRunner&) = delete;
  EagerRunner& operator=(const EagerRunner&) = delete;

  // Runs path shape.path for `items`; returns its outputs (one per named
  // output), valid until the next run of the same path. `timer`, when given,
  // is started and stopped around the forward itself.
  const std::vector<eg_tensor>& run(const eg_graph_shape& shape,
                                    const std::vector<const eg_item*>& items,
                                    StreamTimer* timer = nullptr);

 private:
  struct Scratch {
    void* memory = nullptr;
    size_t bytes = 0;
    void* host = nullptr;
    size_t host_bytes = 0;
    std::vector<eg_tensor> outputs;
  };

  std::shared_ptr<DeviceBackend> backend_;
  const PluginInstance& plugin_;
  const RuntimeConfig& config_;
  const GraphGeometry& geometry_;
  Staging& staging_;
  std::vector<Scratch> scratch_;  // one per path
};

}  // namespace encgraph
