// What one graph's memory looks like, as the plugin describes it: its input
// buffers (one block, 256-aligned), each named output's [rows, width], and its
// workspace. Checks every shape the plugin gives, naming plugin, buffer or
// output, and graph.
#pragma once

#include "../plugin_instance.hpp"

#include <cstddef>
#include <vector>

namespace encgraph {

inline constexpr size_t kAlign = 256;
inline size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
size_t tensor_bytes(const eg_tensor& t);

// Input buffers laid out in one block: each data pointer holds its byte
// offset in the block until place() rebases it.
struct BufferBlock {
  std::vector<eg_tensor> buffers;
  size_t bytes = 0;
  void place(void* base);
};

class GraphGeometry {
 public:
  // Checks once that the plugin can describe its outputs: output_shape_at for
  // several outputs, and post-processing that covers every output.
  GraphGeometry(const PluginInstance& plugin, eg_device_type device);

  BufferBlock buffers(const eg_graph_shape& shape) const;
  // Output o's [rows, outputs[o].width] for a graph (data unset).
  eg_tensor output(const eg_graph_shape& shape, int o) const;
  std::vector<eg_tensor> outputs(const eg_graph_shape& shape) const;
  size_t workspace_bytes(const eg_graph_shape& shape) const;
  int num_outputs() const { return plugin_.info().num_outputs; }

 private:
  const PluginInstance& plugin_;
  eg_device_type device_;
};

}  // namespace encgraph
