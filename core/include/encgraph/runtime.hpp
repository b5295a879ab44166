// The C++ embedding API: load a plugin by name, create an instance on a device,
// capture the budget graphs, execute batches of items, read statistics.
//
//   encgraph::RuntimeConfig cfg;
//   cfg.plugin = "toy";
//   encgraph::Runtime rt(cfg);
//   rt.capture();
//   std::vector<encgraph::Item> items = ...;   // rt.make_item(desc)
//   encgraph::Result r = rt.execute(items);    // r.item(i): rows of item i
//
// A Runtime is used from one thread at a time. The value types live in their
// own headers (runtime_config, item, result, stats); Engine is the interface a
// Runtime shares with DataParallelRuntime.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/budget_plan.hpp>
#include <encgraph/engine.hpp>
#include <encgraph/item.hpp>
#include <encgraph/output_spec.hpp>
#include <encgraph/result.hpp>
#include <encgraph/runtime_config.hpp>
#include <encgraph/stats.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph {

class DeviceBackend;
class GraphManager;
class PluginInstance;

class Runtime : public Engine, public Model {
 public:
  explicit Runtime(const RuntimeConfig& config);
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Model (model.hpp): items and the plugin's description.
  Item make_item(const eg_item_desc& desc) override;
  eg_item_spec spec_for(const eg_item_desc& desc) override;
  bool has_spec_for_desc() const override;
  bool supports_modality(eg_modality modality) const override;
  const BudgetPlan& plan() const override;
  const eg_model_info& model_info() const override;
  const std::vector<OutputSpec>& outputs() const override;
  std::string plugin_name() const override;
  std::string plugin_version() const override;
  eg_device_type device_type() const override;
  std::string device_name() const override;

  void capture() override;
  bool is_captured() const override;
  void clear();

  // The items of descs[i] for every i in `which`, in that order: made on
  // runtime.item_threads threads when the plugin allows it (ABI 1.4,
  // EG_PLUGIN_CONCURRENT_ITEMS), else on this thread. With `load`, each item's
  // pixels are loaded first, on the thread that makes it, and held until it is
  // made. A plugin's failure is rethrown as "<item_label(labels, i)>: <message>"
  // (the loader's pass unchanged), for the first failing position in `which`.
  std::vector<Item> make_items(const std::vector<eg_item_desc>& descs,
                               const std::vector<size_t>& which,
                               const std::vector<std::string>& labels,
                               const PixelLoader* load = nullptr);
  // The threads make_items would use for `items` items (1: the caller's).
  int item_threads(size_t items) const;

  // Runs every item; results in the order given.
  Result execute(const std::vector<const Item*>& items, ExecuteMode mode = ExecuteMode::Planned);
  Result execute(const std::vector<Item>& items, ExecuteMode mode = ExecuteMode::Planned);

  // Engine: one rank.
  Request prepare(const std::vector<eg_item_desc>& items,
                  const std::vector<std::string>& labels = {}) override;
  // Each item is loaded and made on one item thread (make_items), so files
  // are decoded in parallel as well, and its pixels live only until it is made.
  Request prepare_lazy(const std::vector<eg_item_desc>& items,
                       const std::vector<std::string>& labels, const PixelLoader& load) override;
  Result execute(const Request& request, ExecuteMode mode = ExecuteMode::Planned) override;
  Stats stats() const override;
  int world_size() const override { return 1; }
  const Model& model() const override { return *this; }
  Model& model() override { return *this; }
  // Waits for all work the runtime has enqueued.
  void synchronize() override;

  // Diagnosis (`encgraph verify`): pad buffer `buffer` with `logic` instead of
  // its declared padding logic from the next execute on; takes effect without
  // recapturing. Throws Input for an unknown buffer name.
  void override_padding(const std::string& buffer, eg_padding_logic logic);
  void clear_padding_overrides();
  // Diagnosis (`encgraph verify`): every batch from the next execute on runs
  // under these capture-axis keys instead of the plugin's select_axis_keys;
  // nullopt restores the plugin's choice. Throws Input for a wrong key count.
  void force_axis_keys(std::optional<std::vector<int64_t>> keys);

  // Internal: the device backend results are made on (DataParallelRuntime).
  const std::shared_ptr<DeviceBackend>& backend() const { return backend_; }

 private:
  std::shared_ptr<DeviceBackend> backend_;
  std::shared_ptr<PluginInstance> instance_;
  std::unique_ptr<GraphManager> manager_;
  int item_threads_ = 0;  // RuntimeConfig::item_threads
};

}  // namespace encgraph
