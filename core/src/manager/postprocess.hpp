// Post-processing: one batch's path outputs into its items' result rows, by
// the plugin's postprocess_outputs (ABI 1.1), its 1.0 postprocess (one
// output), or the runtime's default: for each output, consecutive rows of path
// 0's output, item after item, in one copy.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"

#include <memory>
#include <vector>

namespace encgraph {

class Postprocessor {
 public:
  Postprocessor(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin);

  // path_outputs[p]: path p's outputs, one per named output (nullptr: the
  // batch sent nothing through path p). results[o * n + k]: item k's rows of
  // output o, where items of one batch are consecutive in each output and
  // batch_rows[o] is their sum.
  void write(const std::vector<const std::vector<eg_tensor>*>& path_outputs,
             const std::vector<const eg_item*>& items, const std::vector<eg_tensor>& results,
             const std::vector<int64_t>& batch_rows);

 private:
  void default_copy(const std::vector<eg_tensor>* path0, const std::vector<eg_tensor>& results,
                    size_t num_items, const std::vector<int64_t>& batch_rows);

  std::shared_ptr<DeviceBackend> backend_;
  const PluginInstance& plugin_;
  std::vector<eg_tensor> flat_;  // reused between batches
};

}  // namespace encgraph
