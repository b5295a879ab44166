#include "staging.hpp"

#include "graph_geometry.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <cstring>

namespace encgraph {
namespace {

// Padding is done on the host when it is small (it then rides along in the
// copy) and on the device when large (a memset instead of moving zeros).
constexpr size_t kHostPadLimit = 64 * 1024;
// NaN in every float format, -1 in every integer one.
constexpr int kPoisonByte = 0xFF;

const char* logic_name(int32_t logic) {
  switch (logic) {
    case EG_PAD_ZERO: return "zero";
    case EG_PAD_REPEAT_LAST: return "repeat-last";
    case EG_PAD_CALLBACK: return "callback";
    default: return "unknown";
  }
}

}  // namespace

Staging::Staging(std::shared_ptr<DeviceBackend> backend, const PluginInstance& plugin,
                 bool poison_memory)
    : backend_(std::move(backend)), plugin_(plugin), poison_(poison_memory) {
  clear_padding_overrides();
}

void Staging::override_padding(const std::string& name, eg_padding_logic logic) {
  const eg_model_info& info = plugin_.info();
  std::string known;
  for (int b = 0; b < info.num_buffers; ++b) {
    const std::string buffer = info.buffers[b].name ? info.buffers[b].name : "";
    if (buffer != name) {
      known += (known.empty() ? "" : ", ") + buffer;
      continue;
    }
    if (logic != EG_PAD_ZERO && logic != EG_PAD_REPEAT_LAST && logic != EG_PAD_CALLBACK)
      throw Error(ErrorKind::Input, "padding logic " + std::to_string(static_cast<int>(logic)) +
                                        " for buffer '" + name +
                                        "' is not one of zero, "
                                        "repeat-last, callback");
    if (logic == EG_PAD_CALLBACK && !plugin_.api()->pad_buffer)
      throw Error(ErrorKind::Input, "buffer '" + name + "' of plugin '" + plugin_.name() +
                                        "' cannot use callback padding: the plugin has no "
                                        "pad_buffer; choose zero or repeat-last");
    spdlog::info("plugin '{}': buffer '{}' padded with {} instead of {} (override)", plugin_.name(),
                 name, logic_name(logic), logic_name(info.buffers[b].padding_logic));
    logic_[b] = logic;
    return;
  }
  throw Error(ErrorKind::Input, "plugin '" + plugin_.name() + "' has no buffer '" + name +
                                    "'; its buffers are: " + (known.empty() ? "(none)" : known));
}

void Staging::clear_padding_overrides() {
  const eg_model_info& info = plugin_.info();
  logic_.assign(info.num_buffers, EG_PAD_ZERO);
  for (int b = 0; b < info.num_buffers; ++b) logic_[b] = info.buffers[b].padding_logic;
}

Staging::Views Staging::views(const std::vector<eg_tensor>& device, void* host) const {
  // Staging mirrors the device layout byte for byte, so one copy can move
  // several buffers at once.
  Views v;
  char* const device_base = static_cast<char*>(device[0].data);
  for (size_t b = 0; b < device.size(); ++b) {
    v.buffers[b].staging = device[b];
    v.buffers[b].staging.device = EG_DEVICE_CPU;
    v.buffers[b].staging.data =
        static_cast<char*>(host) + (static_cast<char*>(device[b].data) - device_base);
    v.buffers[b].rows = -1;
  }
  return v;
}

void Staging::poison(const std::vector<eg_tensor>& device, void* host) const {
  if (!poison_ || device.empty()) return;
  const char* device_base = static_cast<const char*>(device[0].data);
  for (const eg_tensor& t : device)
    std::memset(static_cast<char*>(host) + (static_cast<const char*>(t.data) - device_base),
                kPoisonByte, tensor_bytes(t));
}

void Staging::stage_capture(const eg_graph_shape& shape, Views& v) const {
  const int32_t nb = plugin_.info().num_buffers;
  for (int b = 0; b < nb; ++b) v.buffers[b].rows = -1;
  plugin_.call("prepare_capture_staging", &shape, [&](eg_error* e) {
    return plugin_.prepare_capture_staging()(plugin_.handle(), &shape, v.buffers, nb, e);
  });
}

void Staging::stage_replay(const eg_graph_shape& shape, const std::vector<const eg_item*>& items,
                           Views& v) const {
  const int32_t nb = plugin_.info().num_buffers;
  for (int b = 0; b < nb; ++b) v.buffers[b].rows = -1;
  plugin_.call("prepare_replay_buffers", &shape, [&](eg_error* e) {
    return plugin_.api()->prepare_replay_buffers(plugin_.handle(), &shape, items.data(),
                                                 static_cast<int64_t>(items.size()), v.buffers, nb,
                                                 e);
  });
}

void Staging::capture_on_device(const eg_graph_shape& shape, const std::vector<eg_tensor>& device) {
  const char* what = "prepare_capture_inputs";
  plugin_.call(what, &shape, [&](eg_error* e) {
    return plugin_.api()->prepare_capture_inputs(plugin_.handle(), &shape, device.data(),
                                                 static_cast<int32_t>(device.size()),
                                                 backend_->stream(), e);
  });
}

void Staging::fill_replay(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                          const std::vector<const eg_item*>& items, void* host, int slot) {
  if (device.empty()) return;
  if (slot >= 0) backend_->wait_staging_free(slot);
  Views v = views(device, host);
  poison(device, host);
  stage_replay(shape, items, v);
  int64_t rows[EG_MAX_BUFFERS];
  for (size_t b = 0; b < device.size(); ++b) rows[b] = v.buffers[b].rows;
  pad_and_copy(shape, device, rows, host, slot, false);
}

void Staging::fill_capture(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                           void* host) {
  if (!plugin_.prepare_capture_staging()) {
    capture_on_device(shape, device);
    return;
  }
  if (device.empty()) return;
  Views v = views(device, host);
  poison(device, host);
  stage_capture(shape, v);
  int64_t rows[EG_MAX_BUFFERS];
  for (size_t b = 0; b < device.size(); ++b) rows[b] = v.buffers[b].rows;
  pad_and_copy(shape, device, rows, host, -1, true);
}

void Staging::fill_eager(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                         const std::vector<const eg_item*>& items, void* host) {
  // Values a batch leaves unset keep what capture preparation gives them, as in
  // a replayed graph.
  if (!plugin_.prepare_capture_staging()) {
    capture_on_device(shape, device);
    fill_replay(shape, device, items, host, -1);
    return;
  }
  if (device.empty()) return;
  Views v = views(device, host);
  poison(device, host);
  stage_capture(shape, v);
  int64_t rows[EG_MAX_BUFFERS];
  for (size_t b = 0; b < device.size(); ++b) rows[b] = v.buffers[b].rows;
  // Poisoned again before the batch's values, the dummy values of the buffers
  // the batch leaves unset are put back afterwards.
  std::vector<char> dummy;
  const char* device_base = static_cast<const char*>(device[0].data);
  if (poison_) {
    const eg_tensor& last = device.back();
    const size_t block =
        static_cast<size_t>(static_cast<const char*>(last.data) - device_base) + tensor_bytes(last);
    dummy.assign(static_cast<const char*>(host), static_cast<const char*>(host) + block);
    poison(device, host);
  }
  stage_replay(shape, items, v);
  for (size_t b = 0; b < device.size(); ++b) {
    if (v.buffers[b].rows >= 0) {
      rows[b] = v.buffers[b].rows;
    } else if (poison_) {
      const size_t offset =
          static_cast<size_t>(static_cast<const char*>(device[b].data) - device_base);
      std::memcpy(static_cast<char*>(host) + offset, dummy.data() + offset,
                  tensor_bytes(device[b]));
    }
  }
  pad_and_copy(shape, device, rows, host, -1, true);
}

void Staging::pad_and_copy(const eg_graph_shape& shape, const std::vector<eg_tensor>& device,
                           const int64_t* rows_of, void* host, int slot, bool zero_unset) {
  const eg_model_info& info = plugin_.info();
  const int nb = static_cast<int>(device.size());
  char* const device_base = static_cast<char*>(device[0].data);
  char* const host_base = static_cast<char*>(host);
  struct Span {
    size_t offset, bytes;
  };
  Span copies[EG_MAX_BUFFERS];
  Span zero_fills[EG_MAX_BUFFERS];
  int callbacks[EG_MAX_BUFFERS];
  int64_t callback_rows[EG_MAX_BUFFERS];
  int num_copies = 0, num_fills = 0, num_callbacks = 0;
  for (int b = 0; b < nb; ++b) {
    const eg_tensor& dst = device[b];
    const size_t offset = static_cast<size_t>(static_cast<char*>(dst.data) - device_base);
    char* const staged = host_base + offset;
    const size_t total = tensor_bytes(dst);
    int64_t rows = rows_of[b];
    if (rows < 0) {
      if (!zero_unset) continue;  // keeps what the device holds
      std::memset(staged, 0, total);
      copies[num_copies++] = {offset, total};
      continue;
    }
    if (dst.ndim == 0) {
      copies[num_copies++] = {offset, total};
      continue;
    }
    const int64_t capacity = dst.shape[0];
    if (rows > capacity)
      throw Error(ErrorKind::Plugin, "plugin '" + plugin_.name() + "' wrote " +
                                         std::to_string(rows) + " rows into buffer '" +
                                         info.buffers[b].name + "' of " + std::to_string(capacity) +
                                         " rows for " + describe_shape(shape));
    if (capacity == 0) continue;
    const size_t row_bytes = total / static_cast<size_t>(capacity);
    const size_t real = static_cast<size_t>(rows) * row_bytes;
    switch (logic_[b]) {
      case EG_PAD_REPEAT_LAST:
        if (rows == 0) {
          std::memset(staged, 0, total);
        } else {
          for (int64_t r = rows; r < capacity; ++r)
            std::memcpy(staged + r * row_bytes, staged + (rows - 1) * row_bytes, row_bytes);
        }
        copies[num_copies++] = {offset, total};
        break;
      case EG_PAD_CALLBACK:
        copies[num_copies++] = {offset, real};
        callbacks[num_callbacks] = b;
        callback_rows[num_callbacks++] = rows;
        break;
      default:
        if (total - real <= kHostPadLimit) {
          std::memset(staged + real, 0, total - real);
          copies[num_copies++] = {offset, total};
        } else {
          copies[num_copies++] = {offset, real};
          zero_fills[num_fills++] = {offset + real, total - real};
        }
        break;
    }
  }
  // Once copies are queued, the slot's event must be recorded after them even
  // if a later step throws: the next request waits on it before overwriting
  // the pinned memory those copies read.
  struct MarkConsumed {
    DeviceBackend& backend;
    int slot;
    ~MarkConsumed() {
      if (slot < 0) return;
      try {
        backend.mark_staging_consumed(slot);
      } catch (const std::exception& e) {
        spdlog::error("recording the staging slot's event: {}", e.what());
      }
    }
  } mark_consumed{*backend_, slot};
  if (slot >= 0) backend_->begin_uploads(slot);
  // Merge copies separated only by alignment gaps (bytes no buffer owns).
  for (int i = 0; i < num_copies;) {
    Span merged = copies[i++];
    while (i < num_copies && copies[i].offset >= merged.offset + merged.bytes &&
           copies[i].offset - (merged.offset + merged.bytes) < kAlign) {
      merged.bytes = copies[i].offset + copies[i].bytes - merged.offset;
      ++i;
    }
    if (slot >= 0)  // a replay: the copy may overlap the batch before it
      backend_->upload(device_base + merged.offset, host_base + merged.offset, merged.bytes, slot);
    else
      backend_->copy_to_device(device_base + merged.offset, host_base + merged.offset,
                               merged.bytes);
  }
  if (slot >= 0) backend_->end_uploads(slot);
  for (int i = 0; i < num_fills; ++i)
    backend_->fill_zero(device_base + zero_fills[i].offset, zero_fills[i].bytes);
  for (int i = 0; i < num_callbacks; ++i) {
    const int b = callbacks[i];
    const int64_t rows = callback_rows[i];
    plugin_.call("pad_buffer", &shape, [&](eg_error* e) {
      return plugin_.api()->pad_buffer(plugin_.handle(), b, &device[b], rows, backend_->stream(),
                                       e);
    });
  }
}

}  // namespace encgraph
