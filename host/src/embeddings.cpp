#include "embeddings.hpp"

#include "cli.hpp"

#include <encgraph/error.hpp>

namespace encgraph::host {
namespace {

std::map<std::string, std::string> metadata(const Runtime& runtime, const HostConfig& config) {
  return {{"format", "encgraph.embeddings/1"},
          {"plugin", runtime.plugin_name()},
          {"device", runtime.device_name()},
          {"config_digest", config.digest},
          {"out_hidden_size", std::to_string(runtime.model_info().out_hidden_size)},
          {"dtype", safetensors_dtype(runtime.model_info().out_dtype)}};
}

}  // namespace

EmbeddingSink::EmbeddingSink(const std::string& path, const Runtime& runtime,
                             const HostConfig& config)
    : writer_(path, metadata(runtime, config)) {}

ResultConsumer EmbeddingSink::consumer() {
  return [this](const std::vector<const WorkItem*>& items, const Result& result,
                const std::vector<uint8_t>& host) {
    if (result.size() != items.size())
      throw Error(ErrorKind::Internal, "a result holds " + std::to_string(result.size()) +
                                           " items for a request of " +
                                           std::to_string(items.size()));
    const size_t row_bytes =
        static_cast<size_t>(result.hidden_size()) * dtype_bytes(result.dtype());
    for (size_t i = 0; i < items.size(); ++i) {
      const size_t offset = result.host_offset(i);
      const size_t bytes = static_cast<size_t>(result.rows(i)) * row_bytes;
      if (offset + bytes > host.size())
        throw Error(ErrorKind::Internal, "item " + items[i]->id + " lies outside its result");
      writer_.add(items[i]->id, result.dtype(), {result.rows(i), result.hidden_size()},
                  host.data() + offset, bytes);
      rows_ += result.rows(i);
    }
  };
}

size_t EmbeddingSink::finish() {
  // The commands refuse an empty workload up front; this keeps a good file
  // from ever being replaced by an empty one should that be bypassed.
  if (writer_.size() == 0)
    throw Error(ErrorKind::Internal,
                "no embeddings were produced; the embeddings file was not written");
  writer_.finish();
  return writer_.size();
}

}  // namespace encgraph::host
