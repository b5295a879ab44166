// One created plugin instance and checked calls into its table: a non-OK status
// or an escaping exception becomes encgraph::Error naming the plugin and call.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/error.hpp>
#include <encgraph/output_spec.hpp>
#include <encgraph/plugin_loader.hpp>

#include <string>
#include <utility>
#include <vector>

namespace encgraph {

const char* status_name(eg_status status);
// "path 0 budget 256 axis keys (2)": names a graph in messages.
std::string describe_shape(const eg_graph_shape& shape);

// What `model_info` wrote, made ready for the runtime (model_info.cpp): the 1.1
// fields re-zeroed when `api` is a 1.0 table, a plugin declaring no outputs
// given one ("embeddings"), NULL path units named "tokens"; then every
// declaration checked. Returns the outputs; throws Error(Plugin) naming
// `plugin` (and the output) with the fix.
std::vector<OutputSpec> normalise_model_info(const std::string& plugin, const eg_plugin_api& api,
                                             eg_model_info& info);

class PluginInstance {
 public:
  PluginInstance(const LoadedPlugin& plugin, eg_device_type device, int device_index,
                 const std::string& weights,
                 const std::vector<std::pair<std::string, std::string>>& config);
  ~PluginInstance();
  PluginInstance(const PluginInstance&) = delete;
  PluginInstance& operator=(const PluginInstance&) = delete;

  const eg_plugin_api* api() const { return api_; }
  eg_instance* handle() const { return handle_; }
  const std::string& name() const { return name_; }
  // The model description, normalised once after `create`: a plugin declaring
  // no outputs (1.0) gets outputs[0] = {"embeddings", out_hidden_size,
  // out_dtype, 0}; num_outputs >= 1; every path_units[p] non-NULL ("tokens").
  const eg_model_info& info() const { return info_; }
  const std::vector<OutputSpec>& outputs() const { return outputs_; }
  // The minor ABI version the plugin's table declares, and its table's size.
  uint32_t abi_minor() const { return api_->abi_minor; }
  // 1.1 table entries; nullptr when the plugin's table is too short to hold
  // them (a 1.0 plugin) or the plugin leaves them NULL.
  decltype(eg_plugin_api::prepare_capture_staging) prepare_capture_staging() const;
  decltype(eg_plugin_api::output_shape_at) output_shape_at() const;
  decltype(eg_plugin_api::postprocess_outputs) postprocess_outputs() const;
  // The 1.2 entry; nullptr for a shorter table (1.0, 1.1) or a plugin leaving it NULL.
  decltype(eg_plugin_api::item_spec_for_desc) item_spec_for_desc() const;
  // 1.4: whether item_create/item_spec/item_destroy may run on several threads
  // at once (EG_PLUGIN_CONCURRENT_ITEMS; false for a shorter table).
  bool concurrent_items() const;
  // Whether the plugin counts path_tokens itself for one path (1.1), rather
  // than the runtime using output_tokens (1.0).
  bool writes_path_tokens() const { return abi_minor() >= 1; }

  // Makes an item and reads its spec (zeroed first; a 1.0 one-path plugin's
  // path_tokens[0] set to output_tokens), checked: frames >= 1, no negative
  // size. The caller owns the returned item (destroy it through api()).
  eg_item* make_item(const eg_item_desc& desc, eg_item_spec& spec) const;
  // The spec make_item would give an item of `desc` (its pixels ignored),
  // without keeping an item: the plugin's item_spec_for_desc (1.2), normalised
  // and checked as make_item's spec, or else a synthetic item's spec (pixels
  // NULL) made and destroyed. Failures as make_item's (ErrorKind, message).
  eg_item_spec spec_for(const eg_item_desc& desc) const;

  // Runs fn(eg_error*) -> eg_status; throws on failure naming the call `what`
  // (and the graph `shape`, when given). Messages are only built on failure: this
  // runs on the replay hot path.
  template <class Fn>
  void call(const char* what, Fn&& fn) const {
    call(what, nullptr, std::forward<Fn>(fn));
  }
  template <class Fn>
  void call(const char* what, const eg_graph_shape* shape, Fn&& fn) const {
    eg_error err;
    err.message[0] = '\0';
    eg_status status = EG_ERR_INTERNAL;
    try {
      status = fn(&err);
    } catch (...) {
      throw Error(ErrorKind::Plugin, "plugin '" + name_ + "': " + context(what, shape) +
                                         " let a C++ exception escape (an ABI violation: "
                                         "exported functions must catch everything)");
    }
    if (status != EG_OK) fail(context(what, shape), status, err);
  }

 private:
  static std::string context(const char* what, const eg_graph_shape* shape) {
    return shape ? std::string(what) + " for " + describe_shape(*shape) : std::string(what);
  }
  [[noreturn]] void fail(const std::string& what, eg_status status, eg_error& err) const;
  // make_item's normalisation and checks of a spec the plugin's `call` wrote.
  void normalise_spec(eg_item_spec& spec, const char* call) const;
  const eg_plugin_api* api_;
  eg_instance* handle_ = nullptr;
  std::string name_;
  eg_model_info info_{};
  std::vector<OutputSpec> outputs_;
};

}  // namespace encgraph
