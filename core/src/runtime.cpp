#include "device_backend.hpp"
#include "graph_manager.hpp"
#include "item_threads.hpp"
#include "plugin_instance.hpp"

#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>
#include <encgraph/tuning_options.hpp>

#include <utility>

namespace encgraph {
namespace {

struct DeviceChoice {
  eg_device_type type;
  int index;
};

DeviceChoice choose_device(const std::string& device, uint32_t plugin_devices) {
  if (device == "cpu") return {EG_DEVICE_CPU, 0};
  // "cuda:{local_rank}" picks each process's GPU in a multi-process job
  // (DistributedRuntime resolves it); a process running alone is local rank 0.
  if (device == "cuda" || device == "cuda:{local_rank}") return {EG_DEVICE_CUDA, 0};
  if (device.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      const int index = std::stoi(device.substr(5), &used);
      if (used == device.size() - 5 && index >= 0) return {EG_DEVICE_CUDA, index};
    } catch (const std::exception&) {
    }
  }
  if (device == "auto" || device.empty()) {
    if ((plugin_devices & EG_DEVICE_CUDA) && cuda_device_available()) return {EG_DEVICE_CUDA, 0};
    return {EG_DEVICE_CPU, 0};
  }
  throw_config("runtime.device = \"" + device +
               "\" is not a device; use \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"");
}

}  // namespace

Runtime::Runtime(const RuntimeConfig& config) {
  if (config.plugin.empty()) throw_config("no plugin named: set plugin.name");
  // Before the plugin's library is entered: it may read them as it loads.
  set_tuning_options(config.tuning);
  PluginRegistry registry(config.plugin_dirs);
  const LoadedPlugin& plugin = registry.get(config.plugin);
  const DeviceChoice device = choose_device(config.device, plugin.api->devices);
  backend_ = device.type == EG_DEVICE_CUDA ? make_cuda_backend(device.index, config.overlap_uploads)
                                           : make_cpu_backend();
  backend_->make_current();  // the plugin instance is made on its device
  instance_ = std::make_shared<PluginInstance>(plugin, device.type, device.index, config.weights,
                                               config.plugin_config);
  manager_ = std::make_unique<GraphManager>(backend_, *instance_, config);
  item_threads_ = config.item_threads;
}

Runtime::~Runtime() = default;

Item Runtime::make_item(const eg_item_desc& desc) {
  backend_->make_current();
  eg_item_spec spec{};
  eg_item* item = instance_->make_item(desc, spec);
  return Item(instance_, item, spec);
}

eg_item_spec Runtime::spec_for(const eg_item_desc& desc) {
  backend_->make_current();  // the fallback makes an item on the instance's device
  return instance_->spec_for(desc);
}
bool Runtime::has_spec_for_desc() const {
  return instance_->item_spec_for_desc() != nullptr;
}

void Runtime::capture() {
  backend_->make_current();
  manager_->capture();
}
bool Runtime::is_captured() const {
  return manager_->is_captured();
}
void Runtime::clear() {
  manager_->clear();
}
bool Runtime::supports_modality(eg_modality m) const {
  return (instance_->api()->modalities & static_cast<uint32_t>(m)) != 0;
}

Result Runtime::execute(const std::vector<const Item*>& items, ExecuteMode mode) {
  backend_->make_current();
  return manager_->execute(items, mode);
}
Result Runtime::execute(const std::vector<Item>& items, ExecuteMode mode) {
  std::vector<const Item*> ptrs;
  ptrs.reserve(items.size());
  for (const auto& i : items) ptrs.push_back(&i);
  return execute(ptrs, mode);
}

int Runtime::item_threads(size_t items) const {
  return item_threads_for(item_threads_, instance_->concurrent_items(), items);
}

std::vector<Item> Runtime::make_items(const std::vector<eg_item_desc>& descs,
                                      const std::vector<size_t>& which,
                                      const std::vector<std::string>& labels,
                                      const PixelLoader* load) {
  std::vector<Item> items(which.size());
  backend_->make_current();
  for_each_index(
      which.size(), item_threads(which.size()), [&] { backend_->make_current(); },
      [&](size_t k) {
        const size_t i = which[k];
        eg_item_desc desc = descs[i];
        // Loaded on this thread, so threads decode files in parallel too, and
        // held only until the item is made.
        const std::shared_ptr<const void> pixels = load ? (*load)(i, desc) : nullptr;
        try {
          eg_item_spec spec{};
          eg_item* item = instance_->make_item(desc, spec);
          items[k] = Item(instance_, item, spec);
        } catch (const Error& e) {
          // Named as the caller knows it (a file, a trace line).
          throw Error(e.kind(), item_label(labels, i) + ": " + e.what());
        }
      });
  return items;
}

namespace {

// A one-rank request of `items`, in the caller's order.
Request one_rank_request(std::vector<Item> items) {
  Request request;
  int64_t load = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const eg_item_spec& spec = items[i].spec();
    request.tokens.push_back(spec.output_tokens);
    request.assignment.order.push_back(static_cast<int64_t>(i));
    load += spec.input_size;
  }
  request.assignment.items_per_rank = {static_cast<int64_t>(items.size())};
  request.assignment.load_per_rank = {load};
  request.rank_items.push_back(std::move(items));
  return request;
}

}  // namespace

Request Runtime::prepare(const std::vector<eg_item_desc>& descs,
                         const std::vector<std::string>& labels) {
  std::vector<size_t> all(descs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return one_rank_request(make_items(descs, all, labels));
}

Request Runtime::prepare_lazy(const std::vector<eg_item_desc>& descs,
                              const std::vector<std::string>& labels, const PixelLoader& load) {
  // Each item is loaded on the thread that makes it, and its pixels are held
  // only until it is made (on one thread: one item's at a time).
  std::vector<size_t> all(descs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return one_rank_request(make_items(descs, all, labels, &load));
}

Result Runtime::execute(const Request& request, ExecuteMode mode) {
  const size_t n = request.size();
  if (request.rank_items.size() != 1 || request.rank_items[0].size() != n ||
      request.assignment.order.size() != n)
    throw Error(ErrorKind::Internal, "a request prepared for " +
                                         std::to_string(request.rank_items.size()) +
                                         " ranks run on one runtime");
  // The items in the caller's order, whatever order they were made in.
  std::vector<const Item*> items(n, nullptr);
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = request.assignment.order[k];
    if (i < 0 || static_cast<size_t>(i) >= n || items[i])
      throw Error(ErrorKind::Internal, "a request's assignment is not a permutation");
    items[i] = &request.rank_items[0][k];
  }
  return execute(items, mode);
}

Stats Runtime::stats() const {
  return manager_->stats();
}
const BudgetPlan& Runtime::plan() const {
  return manager_->plan();
}
const eg_model_info& Runtime::model_info() const {
  return instance_->info();
}
const std::vector<OutputSpec>& Runtime::outputs() const {
  return instance_->outputs();
}
void Runtime::override_padding(const std::string& buffer, eg_padding_logic logic) {
  manager_->override_padding(buffer, logic);
}
void Runtime::clear_padding_overrides() {
  manager_->clear_padding_overrides();
}
void Runtime::force_axis_keys(std::optional<std::vector<int64_t>> keys) {
  const int32_t axes = instance_->info().num_capture_axes;
  if (keys && static_cast<int32_t>(keys->size()) != axes)
    throw Error(ErrorKind::Input, "force_axis_keys: " + std::to_string(keys->size()) +
                                      " keys for plugin '" + instance_->name() + "' with " +
                                      std::to_string(axes) + " capture axes");
  manager_->force_axis_keys(std::move(keys));
}
std::string Runtime::plugin_name() const {
  return instance_->name();
}
std::string Runtime::plugin_version() const {
  return instance_->api()->version ? instance_->api()->version : "";
}
void Runtime::synchronize() {
  backend_->synchronize();
}
eg_device_type Runtime::device_type() const {
  return backend_->type();
}
std::string Runtime::device_name() const {
  return backend_->name();
}

}  // namespace encgraph
