#include "graph_geometry.hpp"

#include "../device_backend.hpp"

namespace encgraph {

size_t tensor_bytes(const eg_tensor& t) {
  size_t n = dtype_size(t.dtype);
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

void BufferBlock::place(void* base) {
  for (auto& t : buffers) t.data = static_cast<char*>(base) + reinterpret_cast<uintptr_t>(t.data);
}

GraphGeometry::GraphGeometry(const PluginInstance& plugin, eg_device_type device)
    : plugin_(plugin), device_(device) {
  const int n = plugin_.info().num_outputs;
  if (n > 1 && !plugin_.output_shape_at())
    throw_plugin("plugin '" + plugin_.name() + "' declares " + std::to_string(n) +
                 " outputs but no output_shape_at; set output_shape_at in its table (ABI 1.1)");
  // A 1.0 postprocess writes one output; with several, the other outputs would
  // be left unwritten.
  if (n > 1 && plugin_.api()->postprocess && !plugin_.postprocess_outputs())
    throw_plugin("plugin '" + plugin_.name() + "' declares " + std::to_string(n) +
                 " outputs and a postprocess, which writes only the first; set "
                 "postprocess_outputs in its table instead (ABI 1.1)");
}

BufferBlock GraphGeometry::buffers(const eg_graph_shape& shape) const {
  const eg_model_info& info = plugin_.info();
  BufferBlock block;
  block.buffers.resize(info.num_buffers);
  size_t offset = 0;
  for (int b = 0; b < info.num_buffers; ++b) {
    eg_tensor t{};
    plugin_.call("buffer_shape", &shape, [&](eg_error* e) {
      return plugin_.api()->buffer_shape(plugin_.handle(), &shape, b, &t, e);
    });
    if (t.ndim < 0 || t.ndim > EG_MAX_DIMS)
      throw_plugin("plugin '" + plugin_.name() + "': buffer_shape gave " + std::to_string(t.ndim) +
                   " dimensions for buffer '" + info.buffers[b].name + "'");
    for (int d = 0; d < t.ndim; ++d)
      if (t.shape[d] < 0)
        throw_plugin("plugin '" + plugin_.name() + "': negative extent for buffer '" +
                     info.buffers[b].name + "'");
    t.dtype = info.buffers[b].dtype;
    t.device = device_;
    t.data = reinterpret_cast<void*>(offset);  // relative until placed
    offset += align_up(tensor_bytes(t));
    block.buffers[b] = t;
  }
  block.bytes = offset;
  return block;
}

eg_tensor GraphGeometry::output(const eg_graph_shape& shape, int o) const {
  const OutputSpec& spec = plugin_.outputs().at(o);
  eg_tensor t{};
  if (o == 0)
    plugin_.call("output_shape", &shape, [&](eg_error* e) {
      return plugin_.api()->output_shape(plugin_.handle(), &shape, &t, e);
    });
  else
    plugin_.call("output_shape_at", &shape, [&](eg_error* e) {
      return plugin_.output_shape_at()(plugin_.handle(), &shape, o, &t, e);
    });
  if (t.ndim != 2 || t.shape[1] != spec.width || t.shape[0] < 0) {
    std::string given = "[";
    for (int d = 0; d < t.ndim && d < EG_MAX_DIMS; ++d)
      given += (d ? ", " : "") + std::to_string(t.shape[d]);
    throw_plugin(
        "plugin '" + plugin_.name() + "': " + (o == 0 ? "output_shape" : "output_shape_at") +
        " gave " + given + "] for output '" + spec.name + "' of graph " + describe_shape(shape) +
        "; it must be [rows, " + std::to_string(spec.width) + "] (the output's declared width)");
  }
  t.dtype = spec.dtype;
  t.device = device_;
  return t;
}

std::vector<eg_tensor> GraphGeometry::outputs(const eg_graph_shape& shape) const {
  std::vector<eg_tensor> out;
  out.reserve(num_outputs());
  for (int o = 0; o < num_outputs(); ++o) out.push_back(output(shape, o));
  return out;
}

size_t GraphGeometry::workspace_bytes(const eg_graph_shape& shape) const {
  size_t bytes = 0;
  plugin_.call("workspace_size", &shape, [&](eg_error* e) {
    return plugin_.api()->workspace_size(plugin_.handle(), &shape, &bytes, e);
  });
  return bytes;
}

}  // namespace encgraph
