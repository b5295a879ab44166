// The runtime's host services as the plugin sees them: the logger, the sizes
// of the structs the runtime passes without a struct_size of their own, and
// the user's tuning options.
// One Host per plugin library (hidden visibility keeps it private), attached by
// the entry point; sdk::entry<> does that.
#pragma once

#include <encgraph/plugin_api.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace encgraph::sdk {

class Host {
 public:
  static Host& get() noexcept {
    static Host host;
    return host;
  }

  // Keeps `api` (valid for the life of the process) and the plugin's name.
  void attach(const eg_host_api* api, const char* plugin) noexcept {
    plugin_.store(plugin);
    api_.store(api);
  }
  const eg_host_api* api() const noexcept { return api_.load(); }

  // Logs through the runtime, or nowhere before attach (never to stdout).
  void log(eg_log_level level, const char* message) const noexcept {
    const eg_host_api* h = api_.load();
    if (h && h->log && message) h->log(h->host_context, level, plugin_.load(), message);
  }
  void log(eg_log_level level, const std::string& message) const noexcept {
    log(level, message.c_str());
  }
  void debug(const std::string& m) const noexcept { log(EG_LOG_DEBUG, m); }
  void info(const std::string& m) const noexcept { log(EG_LOG_INFO, m); }
  void warn(const std::string& m) const noexcept { log(EG_LOG_WARN, m); }
  void error(const std::string& m) const noexcept { log(EG_LOG_ERROR, m); }

  // A tuning option the user set for plugins ([plugin.tuning]; ABI 1.3), or
  // nullptr: not set, before attach, or on an older runtime. The runtime has
  // checked the value (docs/config.md lists the keys and their rules).
  const char* tuning_option(const char* key) const noexcept {
    return eg_host_tuning_option(api_.load(), key);
  }

  // The runtime's sizes of eg_item_desc / eg_item_spec (1.0's before attach or
  // on a 1.0 runtime): read or write those structs only inside them.
  size_t item_desc_size() const noexcept { return eg_host_struct_size(api_.load(), 0); }
  size_t item_spec_size() const noexcept { return eg_host_struct_size(api_.load(), 1); }

 private:
  Host() = default;
  std::atomic<const eg_host_api*> api_{nullptr};
  std::atomic<const char*> plugin_{"plugin"};
};

inline Host& host() noexcept {
  return Host::get();
}

}  // namespace encgraph::sdk
