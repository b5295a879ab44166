// What the Qwen plugins add to the SDK (sdk/include/encgraph/sdk/plugin.hpp):
// their keys, read by the kit's ConfigReader, made known to the SDK's reader;
// and the SDK's table with two duties it leaves open, done as the Qwen plugins
// have always done them:
//  - model_info refuses a runtime struct_size below ABI 1.0's (the runtime's
//    bug), rather than writing a prefix of the struct;
//  - prepare_capture_staging reports rows -1 ("the plugin wrote none": the
//    runtime pads the whole buffer) for every buffer the model leaves
//    untouched, whatever the runtime put there.
// QWEN_VL_PLUGIN(Model) exports the entry symbol as ENCGRAPH_SDK_PLUGIN does.
#pragma once

#include <encgraph/sdk/sdk.hpp>

#include <string>

namespace qwen_vl {

// Marks every key of the create params known to the SDK's reader: the
// plugin's own reader (encoder_kit::ConfigReader) read them and refused the
// unknown ones with its message.
inline void known_to_sdk(encgraph::sdk::CreateArgs& args) {
  for (int64_t i = 0; i < args.raw.num_config; ++i)
    if (args.raw.config[i].key) args.config.known(args.raw.config[i].key);
}

template <class M>
struct StrictSlots {
  static eg_status model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
    if (out && out->struct_size < EG_MODEL_INFO_V1_0_SIZE)
      return encgraph::sdk::guard(err, [&] {
        encgraph::sdk::invalid("the runtime's eg_model_info struct_size " +
                               std::to_string(out->struct_size) + " is below ABI 1.0's " +
                               std::to_string(EG_MODEL_INFO_V1_0_SIZE));
      });
    return encgraph::sdk::plugin_table<M>().model_info(i, out, err);
  }
  static eg_status capture_staging(eg_instance* i, const eg_graph_shape* shape,
                                   eg_replay_buffer* buffers, int32_t n, eg_error* err) {
    for (int32_t b = 0; buffers && b < n; ++b) buffers[b].rows = -1;
    return encgraph::sdk::plugin_table<M>().prepare_capture_staging(i, shape, buffers, n, err);
  }
};

// sdk::entry<M> (the host attached, other ABIs declined), then the table with
// the two slots above.
template <class M>
const eg_plugin_api* strict_entry(const eg_host_api* host) noexcept {
  const eg_plugin_api* base = encgraph::sdk::entry<M>(host);
  if (!base) return nullptr;
  static const eg_plugin_api table = [base] {
    eg_plugin_api t = *base;
    t.model_info = &StrictSlots<M>::model_info;
    t.prepare_capture_staging = &StrictSlots<M>::capture_staging;
    return t;
  }();
  return &table;
}

}  // namespace qwen_vl

#define QWEN_VL_PLUGIN(Model)                                             \
  extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry( \
      const eg_host_api* host) {                                          \
    return ::qwen_vl::strict_entry<Model>(host);                          \
  }
