#include "eager_runner.hpp"

#include <algorithm>

namespace encgraph {

EagerRunner::EagerRunner(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin,
                         const RuntimeConfig& config, const GraphGeometry& geometry,
                         Staging& staging)
    : backend_(std::move(backend)),
      plugin_(plugin),
      config_(config),
      geometry_(geometry),
      staging_(staging),
      scratch_(plugin.info().num_paths) {}

EagerRunner::~EagerRunner() {
  for (auto& s : scratch_) {
    backend_->free(s.memory);
    backend_->free_host(s.host);
  }
}

const std::vector<eg_tensor>& EagerRunner::run(const eg_graph_shape& shape,
                                               const std::vector<const eg_item*>& items,
                                               StreamTimer* timer) {
  Scratch& scratch = scratch_.at(shape.path);
  BufferBlock block = geometry_.buffers(shape);
  std::vector<eg_tensor> outputs = geometry_.outputs(shape);
  const size_t ws = geometry_.workspace_bytes(shape);
  size_t need = block.bytes + align_up(ws);
  for (const auto& o : outputs) need += align_up(tensor_bytes(o));
  // The previous eager run's staging and scratch may still be in use.
  backend_->synchronize();
  if (scratch.bytes < need) {
    backend_->free(scratch.memory);
    scratch.memory = nullptr;
    scratch.bytes = 0;
    scratch.memory = backend_->alloc(need, "an eager run of " + describe_shape(shape));
    scratch.bytes = need;
  }
  if (scratch.host_bytes < block.bytes || !scratch.host) {
    backend_->free_host(scratch.host);
    scratch.host = nullptr;
    scratch.host_bytes = 0;
    scratch.host = backend_->alloc_host(std::max<size_t>(block.bytes, 1), "eager staging");
    scratch.host_bytes = block.bytes;
  }
  char* base = static_cast<char*>(scratch.memory);
  block.place(base);
  size_t offset = block.bytes;
  for (auto& o : outputs) {
    o.data = base + offset;
    offset += align_up(tensor_bytes(o));
  }
  void* workspace = base + offset;
  if (config_.poison_memory) {
    for (const auto& o : outputs) backend_->fill_bytes(o.data, 0xFF, tensor_bytes(o));
    backend_->fill_bytes(workspace, 0xFF, ws);
  }
  staging_.fill_eager(shape, block.buffers, items, scratch.host);
  scratch.outputs = std::move(outputs);
  eg_forward_args args{};
  args.shape = shape;
  args.buffers = block.buffers.data();
  args.num_buffers = static_cast<int32_t>(block.buffers.size());
  args.struct_size = sizeof(eg_forward_args);
  args.output = scratch.outputs[0];
  args.workspace = workspace;
  args.workspace_size = ws;
  args.stream = backend_->stream();
  args.outputs = scratch.outputs.data();
  args.num_outputs = static_cast<int32_t>(scratch.outputs.size());
  auto fn = plugin_.api()->forward_eager ? plugin_.api()->forward_eager : plugin_.api()->forward;
  if (timer) timer->start();
  plugin_.call("eager forward", &shape,
               [&](eg_error* e) { return fn(plugin_.handle(), &args, e); });
  if (timer) timer->stop();
  return scratch.outputs;
}

}  // namespace encgraph
