// Pieces of the C ABI glue that every model plugin needs alike: the entry
// point's body, logging through the host, tensor sizes, and the size-safe
// writes of the growable structs (model info, item spec, forward outputs).
// Each plugin keeps its own eg_plugin_api table and its exported
// encgraph_plugin_entry.
#pragma once

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/model_info.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace encoder_kit {

// The body of encgraph_plugin_entry: keeps the host's table in `kept` (for
// log_to_host) and hands out `api`, or nullptr (after logging why) to a host of
// another major ABI or of a minor below `min_minor` (a plugin relying on a 1.1
// function, such as prepare_capture_staging instead of prepare_capture_inputs,
// cannot serve a 1.0 runtime).
inline const eg_plugin_api* accept_host(const eg_host_api* host, const eg_host_api*& kept,
                                        const eg_plugin_api& api, uint32_t min_minor = 0) {
  kept = host;
  if (host && host->abi_major != EG_ABI_VERSION_MAJOR) return nullptr;
  if (host && host->abi_minor < min_minor) {
    const std::string message =
        std::string("plugin '") + api.name + "' needs plugin ABI 1." + std::to_string(min_minor) +
        " or newer; this encgraph runtime has " + std::to_string(host->abi_major) + "." +
        std::to_string(host->abi_minor) + ": update encgraph";
    if (host->log) host->log(host->host_context, EG_LOG_ERROR, api.name, message.c_str());
    return nullptr;
  }
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

// Writes `info` into the runtime's model info only up to the struct_size the
// runtime set (a 1.0 runtime's struct ends before the 1.1 fields), never by
// assigning the whole struct (sdk::write_model_info); a struct_size below
// 1.0's is the runtime's bug, refused rather than half written.
inline void write_model_info(const eg_model_info& info, eg_model_info* out) {
  if (out->struct_size < EG_MODEL_INFO_V1_0_SIZE)
    fail(EG_ERR_INVALID_ARGUMENT, "the runtime's eg_model_info struct_size " +
                                      std::to_string(out->struct_size) + " is below ABI 1.0's " +
                                      std::to_string(EG_MODEL_INFO_V1_0_SIZE));
  encgraph::sdk::write_model_info(out, info);
}

// Writes `spec` into the runtime's item spec only up to the size the host
// gives eg_item_spec (it carries no struct_size of its own).
inline void write_item_spec(const eg_host_api* host, const eg_item_spec& spec, eg_item_spec* out) {
  std::memcpy(static_cast<void*>(out), &spec, std::min(eg_host_struct_size(host, 1), sizeof(spec)));
}

// Output `index` of a forward: the primary output for 0, else the 1.1
// outputs array, which must cover it (a runtime that did not pass it cannot
// have asked for several outputs: an error, not a silent skip).
inline void* forward_output(const eg_forward_args& a, int32_t index, const char* plugin) {
  if (index == 0) return a.output.data;
  if (!EG_HAS_FIELD(a.struct_size, eg_forward_args, num_outputs) || !a.outputs ||
      index >= a.num_outputs || !a.outputs[index].data)
    fail(EG_ERR_INVALID_ARGUMENT,
         std::string(plugin) + ": the forward got no tensor for output " + std::to_string(index) +
             " (the runtime passed fewer outputs than model_info declares)");
  return a.outputs[index].data;
}

}  // namespace encoder_kit
