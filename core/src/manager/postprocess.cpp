#include "postprocess.hpp"

namespace encgraph {

Postprocessor::Postprocessor(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin)
    : backend_(std::move(backend)), plugin_(plugin) {}

void Postprocessor::write(const std::vector<const std::vector<eg_tensor>*>& path_outputs,
                          const std::vector<const eg_item*>& items,
                          const std::vector<eg_tensor>& results,
                          const std::vector<int64_t>& batch_rows) {
  const int32_t num_paths = static_cast<int32_t>(path_outputs.size());
  const int32_t num_outputs = static_cast<int32_t>(batch_rows.size());
  const int64_t n = static_cast<int64_t>(items.size());
  if (auto fn = plugin_.postprocess_outputs()) {
    flat_.assign(static_cast<size_t>(num_paths) * num_outputs, eg_tensor{});
    for (int32_t p = 0; p < num_paths; ++p)
      if (path_outputs[p])
        for (int32_t o = 0; o < num_outputs; ++o)
          flat_[p * num_outputs + o] = (*path_outputs[p])[o];
    plugin_.call("postprocess_outputs", [&](eg_error* e) {
      return fn(plugin_.handle(), flat_.data(), num_paths, num_outputs, items.data(), n,
                results.data(), backend_->stream(), e);
    });
    return;
  }
  if (plugin_.api()->postprocess && num_outputs == 1) {
    flat_.assign(num_paths, eg_tensor{});
    for (int32_t p = 0; p < num_paths; ++p)
      if (path_outputs[p]) flat_[p] = (*path_outputs[p])[0];
    plugin_.call("postprocess", [&](eg_error* e) {
      return plugin_.api()->postprocess(plugin_.handle(), flat_.data(), num_paths, items.data(), n,
                                        results.data(), backend_->stream(), e);
    });
    return;
  }
  default_copy(path_outputs[0], results, items.size(), batch_rows);
}

void Postprocessor::default_copy(const std::vector<eg_tensor>* path0,
                                 const std::vector<eg_tensor>& results, size_t num_items,
                                 const std::vector<int64_t>& batch_rows) {
  for (size_t o = 0; o < batch_rows.size(); ++o) {
    const int64_t rows = batch_rows[o];
    if (rows == 0) continue;
    const eg_tensor* out = path0 ? &(*path0)[o] : nullptr;
    if (!out || !out->data || out->shape[0] < rows)
      throw_plugin("plugin '" + plugin_.name() + "': path 0 produced " +
                   std::to_string(out && out->data ? out->shape[0] : 0) + " rows of output '" +
                   plugin_.outputs()[o].name + "' for a batch of " + std::to_string(rows) +
                   " rows and the plugin has no postprocess");
    const size_t row_bytes = static_cast<size_t>(out->shape[1]) * dtype_size(out->dtype);
    backend_->copy_on_device(results[o * num_items].data, out->data,
                             static_cast<size_t>(rows) * row_bytes);
  }
}

}  // namespace encgraph
