// One created plugin instance and checked calls into its table: a non-OK status
// or an escaping exception becomes encgraph::Error naming the plugin and call.
#pragma once

#include <encgraph/error.hpp>
#include <encgraph/plugin_api.h>
#include <encgraph/plugin_loader.hpp>

#include <string>
#include <utility>
#include <vector>

namespace encgraph {

const char* status_name(eg_status status);

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
  const eg_model_info& info() const { return info_; }

  // Runs fn(eg_error*) -> eg_status; throws on failure with `what` as context.
  template <class Fn>
  void call(const std::string& what, Fn&& fn) const {
    eg_error err;
    err.message[0] = '\0';
    eg_status status = EG_ERR_INTERNAL;
    try {
      status = fn(&err);
    } catch (...) {
      throw Error(ErrorKind::Plugin, "plugin '" + name_ + "': " + what +
                                         " let a C++ exception escape (an ABI violation: "
                                         "exported functions must catch everything)");
    }
    if (status != EG_OK) fail(what, status, err);
  }

 private:
  [[noreturn]] void fail(const std::string& what, eg_status status, eg_error& err) const;
  const eg_plugin_api* api_;
  eg_instance* handle_ = nullptr;
  std::string name_;
  eg_model_info info_{};
};

}  // namespace encgraph
