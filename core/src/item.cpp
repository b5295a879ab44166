#include "plugin_instance.hpp"

#include <encgraph/item.hpp>

#include <utility>

namespace encgraph {

Item::Item(std::shared_ptr<PluginInstance> owner, eg_item* item, const eg_item_spec& spec)
    : owner_(std::move(owner)), item_(item), spec_(spec) {}

Item::Item(Item&& o) noexcept
    : owner_(std::move(o.owner_)), item_(std::exchange(o.item_, nullptr)), spec_(o.spec_) {}

Item& Item::operator=(Item&& o) noexcept {
  if (this != &o) {
    if (item_) owner_->api()->item_destroy(owner_->handle(), item_);
    owner_ = std::move(o.owner_);
    item_ = std::exchange(o.item_, nullptr);
    spec_ = o.spec_;
  }
  return *this;
}

Item::~Item() {
  if (item_) owner_->api()->item_destroy(owner_->handle(), item_);
}

}  // namespace encgraph
