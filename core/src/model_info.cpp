// Normalising and checking a plugin's model description (ABI 1.0 and 1.1).
#include "device_backend.hpp"
#include "plugin_instance.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace encgraph {
namespace {

constexpr size_t kMaxOutputName = 64;

bool valid_output_name(const char* name) {
  if (!name) return false;
  const size_t n = ::strnlen(name, kMaxOutputName + 1);
  if (n == 0 || n > kMaxOutputName) return false;
  return std::all_of(name, name + n, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// Whether the table is 1.1 or later: only then are the 1.1 fields of model_info
// the plugin's (a 1.0 plugin never wrote them).
bool is_v1_1_table(const eg_plugin_api& api) {
  return api.abi_minor >= 1 && api.struct_size >= EG_PLUGIN_API_V1_1_SIZE;
}

}  // namespace

std::vector<OutputSpec> normalise_model_info(const std::string& plugin, const eg_plugin_api& api,
                                             eg_model_info& info) {
  const std::string who = "plugin '" + plugin + "'";
  info.struct_size = sizeof(info);
  if (!is_v1_1_table(api)) {
    info.num_outputs = 0;
    info.reserved3 = 0;
    std::memset(info.outputs, 0, sizeof(info.outputs));
    std::memset(info.path_units, 0, sizeof(info.path_units));
  }
  if (info.out_hidden_size <= 0)
    throw_plugin(who + " declares out_hidden_size " + std::to_string(info.out_hidden_size) +
                 "; every output row needs at least one column");
  if (dtype_size(info.out_dtype) == 0)
    throw_plugin(who + " declares out_dtype " + std::to_string(info.out_dtype) +
                 ", which is not an eg_dtype");
  if (info.num_outputs == 0) {  // 1.0, or a 1.1 plugin with one output
    info.num_outputs = 1;
    info.outputs[0] = eg_output_info{"embeddings", info.out_hidden_size, info.out_dtype, 0, 0};
  }
  if (info.num_outputs < 0 || info.num_outputs > EG_MAX_OUTPUTS)
    throw_plugin(who + " declares " + std::to_string(info.num_outputs) + " outputs; 1.." +
                 std::to_string(EG_MAX_OUTPUTS) + " are allowed (0: one, \"embeddings\")");
  std::vector<OutputSpec> outputs;
  std::set<std::string> names;
  for (int o = 0; o < info.num_outputs; ++o) {
    const eg_output_info& out = info.outputs[o];
    const std::string index = "output " + std::to_string(o);
    if (!valid_output_name(out.name))
      throw_plugin(who + ": " + index + " has no valid name; name it with 1-" +
                   std::to_string(kMaxOutputName) + " characters of [A-Za-z0-9_.-]");
    const std::string named = who + ": output '" + out.name + "'";
    if (!names.insert(out.name).second)
      throw_plugin(named + " is declared twice; output names must be unique");
    if (out.width <= 0)
      throw_plugin(named + " has width " + std::to_string(out.width) +
                   "; every output row needs at least one column");
    if (dtype_size(out.dtype) == 0)
      throw_plugin(named + " has dtype " + std::to_string(out.dtype) +
                   ", which is not an eg_dtype");
    if (out.rows_per_item < 0)
      throw_plugin(named + " has rows_per_item " + std::to_string(out.rows_per_item) +
                   "; use 0 (the item's output_tokens) or a positive count");
    outputs.push_back({out.name, out.width, out.dtype, out.rows_per_item});
  }
  const eg_output_info& primary = info.outputs[0];
  if (primary.width != info.out_hidden_size || primary.dtype != info.out_dtype ||
      primary.rows_per_item != 0)
    throw_plugin(who + ": output '" + primary.name + "' (outputs[0], the primary output) is " +
                 std::to_string(primary.width) + " columns of " + dtype_name(primary.dtype) +
                 " with rows_per_item " + std::to_string(primary.rows_per_item) +
                 ", but it must match out_hidden_size (" + std::to_string(info.out_hidden_size) +
                 "), out_dtype (" + dtype_name(info.out_dtype) + ") and rows_per_item 0");
  if (info.num_outputs > 1 &&
      !(EG_HAS_FIELD(api.struct_size, eg_plugin_api, output_shape_at) && api.output_shape_at))
    throw_plugin(who + " declares " + std::to_string(info.num_outputs) +
                 " outputs but no output_shape_at; set it in the table (ABI 1.1)");
  for (int p = 0; p < EG_MAX_PATHS; ++p) {
    if (!info.path_units[p]) info.path_units[p] = "tokens";
    const size_t n = ::strnlen(info.path_units[p], kMaxOutputName + 1);
    if (p < info.num_paths && (n == 0 || n > kMaxOutputName))
      throw_plugin(who + ": path_units[" + std::to_string(p) + "] is " +
                   (n ? "longer than " + std::to_string(kMaxOutputName) + " characters" : "empty") +
                   "; name the unit briefly (e.g. \"patches\") or leave it NULL (\"tokens\")");
  }
  return outputs;
}

}  // namespace encgraph
