// Pieces of the C ABI glue that every model plugin needs alike: the entry
// point's body, logging through the host, and tensor sizes. Each plugin keeps
// its own eg_plugin_api table and its exported encgraph_plugin_entry.
#pragma once

#include <egk/numeric.hpp>

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <string>

namespace egk {

// The body of encgraph_plugin_entry: keeps the host's table in `kept` (for
// log_to_host) and hands out `api`, or nullptr to a host of another major ABI.
inline const eg_plugin_api* accept_host(const eg_host_api* host, const eg_host_api*& kept,
                                        const eg_plugin_api& api) {
  kept = host;
  if (host && host->abi_major != EG_ABI_VERSION_MAJOR) return nullptr;
  return &api;
}

// Passes a message to the host's logger, when the host has one.
inline void log_to_host(const eg_host_api* host, eg_log_level level, const char* plugin,
                        const std::string& message) {
  if (host && host->log) host->log(host->host_context, level, plugin, message.c_str());
}

// Bytes of a tensor's data: its dtype's size times every dimension.
inline size_t tensor_bytes(const eg_tensor& t) {
  size_t n = dtype_bytes(t.dtype);
  for (int d = 0; d < t.ndim; ++d) n *= static_cast<size_t>(t.shape[d]);
  return n;
}

}  // namespace egk
