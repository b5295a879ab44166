// Staging and padding: how a graph's input buffers get their values. The
// plugin writes real rows into host staging that mirrors the device block byte
// for byte; the runtime pads each buffer past its rows with the buffer's
// padding logic (or a diagnosis override) and moves the block with as few
// copies as it can. Capture inputs (ABI 1.1), replays and eager runs all go
// through the same copy-and-pad step; a 1.0 plugin's capture inputs are still
// written on the device by prepare_capture_inputs.
#pragma once

#include "../device_backend.hpp"
#include "../plugin_instance.hpp"

#include <memory>
#include <string>
#include <vector>

namespace encgraph {

class Staging {
 public:
  Staging(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin, bool poison_memory);

  // Pads buffer `name` with `logic` from the next fill on (encgraph verify).
  // Throws Input naming the buffers there are when `name` is not one of them.
  void override_padding(const std::string& name, eg_padding_logic logic);
  void clear_padding_overrides();

  // `device` are one block's buffers (buffers[0] at its start), `host` staging
  // of the block's size. A buffer the plugin leaves unwritten (rows -1) keeps
  // what the device holds.
  // Before a replay: the batch's values; `slot` >= 0 is the alternating
  // staging slot whose previous copies are waited for and then marked.
  void fill_replay(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                   const std::vector<const eg_item*>& items, void* host, int slot);
  // Before warm-up and capture: the plugin's dummy values.
  void fill_capture(const eg_graph_shape& shape, const std::vector<eg_tensor>& device, void* host);
  // Before an eager run: the dummy values, then the batch's over them, in one
  // copy when the plugin stages capture inputs on the host.
  void fill_eager(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                  const std::vector<const eg_item*>& items, void* host);

 private:
  struct Views {
    eg_replay_buffer buffers[EG_MAX_BUFFERS];
  };
  Views views(const std::vector<eg_tensor>& device, void* host) const;
  void poison(const std::vector<eg_tensor>& device, void* host) const;
  void stage_capture(const eg_graph_shape& shape, Views& v) const;
  void stage_replay(const eg_graph_shape& shape, const std::vector<const eg_item*>& items,
                    Views& v) const;
  void capture_on_device(const eg_graph_shape& shape, const std::vector<eg_tensor>& device);
  // Pads every buffer past rows[b] and copies it; rows[b] < 0: the buffer is
  // left as the device holds it, or zeroed when `zero_unset`.
  void pad_and_copy(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                    const int64_t* rows, void* host, int slot, bool zero_unset);

  std::shared_ptr<DeviceBackend> backend_;
  const PluginInstance& plugin_;
  bool poison_;
  std::vector<int32_t> logic_;  // per buffer: declared, or overridden
};

}  // namespace encgraph
