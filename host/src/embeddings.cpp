#include "embeddings.hpp"

#include "cli.hpp"

#include <encgraph/error.hpp>

#include <map>

namespace encgraph::host {
namespace {

std::map<std::string, std::string> metadata(const Model& model, const HostConfig& config) {
  // out_hidden_size and dtype describe the first output (the id-named
  // tensors), as in files written before outputs had names.
  std::string names;
  for (const OutputSpec& o : model.outputs()) names += (names.empty() ? "" : ",") + o.name;
  return {{"format", "encgraph.embeddings/1"},
          {"plugin", model.plugin_name()},
          {"device", model.device_name()},
          {"config_digest", config.digest},
          {"out_hidden_size", std::to_string(model.model_info().out_hidden_size)},
          {"dtype", safetensors_dtype(model.model_info().out_dtype)},
          {"outputs", names}};
}

}  // namespace

std::string embedding_name(const std::string& id, const std::vector<OutputSpec>& outputs,
                           size_t o) {
  return o == 0 ? id : id + "/" + outputs.at(o).name;
}

void check_embedding_names(const std::vector<WorkItem>& work,
                           const std::vector<OutputSpec>& outputs) {
  if (outputs.size() < 2) return;
  std::map<std::string, const WorkItem*> ids;
  for (const WorkItem& w : work) ids.emplace(w.id, &w);
  for (const WorkItem& w : work)
    for (size_t o = 1; o < outputs.size(); ++o) {
      const std::string name = embedding_name(w.id, outputs, o);
      const auto other = ids.find(name);
      if (other != ids.end())
        throw Error(ErrorKind::Input,
                    "item '" + w.id + "': its output '" + outputs[o].name +
                        "' would be stored as '" + name +
                        "', which is the id of another item; the embeddings file names " +
                        "an item's first output by its id and every other output by " +
                        "'<id>/<output>': give one of the two items another id (or file name)");
    }
}

EmbeddingSink::EmbeddingSink(const std::string& path, const Model& model, const HostConfig& config)
    : outputs_(model.outputs()),
      writer_(path, metadata(model, config)),
      rows_(outputs_.size(), 0) {}

ResultConsumer EmbeddingSink::consumer() {
  return [this](const std::vector<const WorkItem*>& items, const Result& result) {
    if (result.size() != items.size() || result.num_outputs() != outputs_.size())
      throw Error(ErrorKind::Internal, "a result holds " + std::to_string(result.size()) +
                                           " items of " + std::to_string(result.num_outputs()) +
                                           " outputs for a request of " +
                                           std::to_string(items.size()) + " items of " +
                                           std::to_string(outputs_.size()));
    for (size_t o = 0; o < result.num_outputs(); ++o) {
      const std::vector<uint8_t> host = result.to_host(o);
      const size_t row_bytes =
          static_cast<size_t>(result.hidden_size(o)) * dtype_bytes(result.dtype(o));
      for (size_t i = 0; i < items.size(); ++i) {
        const size_t offset = result.host_offset(i, o);
        const size_t bytes = static_cast<size_t>(result.rows(i, o)) * row_bytes;
        if (offset > host.size() || bytes > host.size() - offset)
          throw Error(ErrorKind::Internal, "item " + items[i]->id + " lies outside its result");
        writer_.add(embedding_name(items[i]->id, outputs_, o), result.dtype(o),
                    {result.rows(i, o), result.hidden_size(o)}, host.data() + offset, bytes);
        rows_[o] += result.rows(i, o);
      }
    }
    items_ += items.size();
  };
}

std::string EmbeddingSink::describe() const {
  std::string s;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (o > 0) s += "; '" + outputs_[o].name + "': ";
    s += std::to_string(rows_[o]) + " rows of " + std::to_string(outputs_[o].width) + ", " +
         dtype_name(outputs_[o].dtype);
  }
  return s;
}

size_t EmbeddingSink::finish() {
  // The commands refuse an empty workload up front; this keeps a good file
  // from ever being replaced by an empty one should that be bypassed.
  if (writer_.size() == 0)
    throw Error(ErrorKind::Internal,
                "no embeddings were produced; the embeddings file was not written");
  writer_.finish();
  return items_;
}

}  // namespace encgraph::host
