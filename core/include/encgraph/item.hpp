// A plugin-owned item (image or video), made by Runtime::make_item.
#pragma once

#include <encgraph/plugin_api.h>

#include <memory>

namespace encgraph {

class PluginInstance;

class Item {
 public:
  Item() = default;
  // Takes ownership of `item`, made by `owner`'s plugin; destroyed through it.
  Item(std::shared_ptr<PluginInstance> owner, eg_item* item, const eg_item_spec& spec);
  Item(Item&&) noexcept;
  Item& operator=(Item&&) noexcept;
  Item(const Item&) = delete;
  Item& operator=(const Item&) = delete;
  ~Item();
  const eg_item* get() const { return item_; }
  const eg_item_spec& spec() const { return spec_; }

 private:
  std::shared_ptr<PluginInstance> owner_;  // keeps the instance alive while the item is
  eg_item* item_ = nullptr;
  eg_item_spec spec_{};
};

}  // namespace encgraph
