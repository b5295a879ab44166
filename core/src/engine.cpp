// Engine's defaults: one process, every item loaded before it is made.
#include <encgraph/engine.hpp>
#include <encgraph/model.hpp>

namespace encgraph {

Request Engine::prepare_lazy(const std::vector<eg_item_desc>& items,
                             const std::vector<std::string>& labels, const PixelLoader& load) {
  std::vector<eg_item_desc> descs = items;
  std::vector<std::shared_ptr<const void>> held;
  held.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) held.push_back(load(i, descs[i]));
  return prepare(descs, labels);
}

std::string item_label(const std::vector<std::string>& labels, size_t i) {
  return i < labels.size() ? labels[i] : "item " + std::to_string(i);
}

std::vector<std::string> Engine::device_names() const {
  return {model().device_name()};
}

}  // namespace encgraph
