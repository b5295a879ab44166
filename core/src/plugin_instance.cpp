#include "plugin_instance.hpp"

#include <cstring>

namespace encgraph {

const char* status_name(eg_status status) {
  switch (status) {
    case EG_OK: return "ok";
    case EG_ERR_INVALID_ARGUMENT: return "invalid argument";
    case EG_ERR_NOT_FOUND: return "not found";
    case EG_ERR_OUT_OF_MEMORY: return "out of memory";
    case EG_ERR_UNSUPPORTED: return "unsupported";
    case EG_ERR_DEVICE: return "device error";
    case EG_ERR_IO: return "I/O error";
    default: return "internal error";
  }
}

std::string describe_shape(const eg_graph_shape& s) {
  std::string out = "path " + std::to_string(s.path) + " budget " + std::to_string(s.token_budget);
  if (s.num_axis_keys > 0) {
    out += " axis keys (";
    for (int i = 0; i < s.num_axis_keys; ++i)
      out += (i ? ", " : "") + std::to_string(s.axis_keys[i]);
    out += ")";
  }
  return out;
}

void PluginInstance::fail(const std::string& what, eg_status status, eg_error& err) const {
  err.message[EG_ERROR_MESSAGE_CAPACITY - 1] = '\0';
  const ErrorKind kind =
      status == EG_ERR_OUT_OF_MEMORY || status == EG_ERR_DEVICE ? ErrorKind::Device
      // The ABI's "missing file, tensor, key" is the user's to fix too.
      : status == EG_ERR_INVALID_ARGUMENT || status == EG_ERR_NOT_FOUND ? ErrorKind::Input
                                                                        : ErrorKind::Plugin;
  throw Error(kind, "plugin '" + name_ + "': " + what + " failed (" + status_name(status) +
                        "): " + (err.message[0] ? err.message : "no message given"));
}

PluginInstance::PluginInstance(const LoadedPlugin& plugin, eg_device_type device, int device_index,
                               const std::string& weights,
                               const std::vector<std::pair<std::string, std::string>>& config)
    : api_(plugin.api), name_(plugin.name) {
  if (!(api_->devices & device))
    throw Error(ErrorKind::Config, "plugin '" + name_ + "' does not support device " +
                                       device_names(device) + " (it supports " +
                                       device_names(api_->devices) + "); change runtime.device");
  std::vector<eg_config_entry> entries;
  entries.reserve(config.size());
  for (const auto& [k, v] : config) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params params{};
  params.struct_size = sizeof(params);
  params.device = device;
  params.device_index = device_index;
  params.weights = weights.empty() ? nullptr : weights.c_str();
  params.config = entries.data();
  params.num_config = static_cast<int64_t>(entries.size());
  call("create", [&](eg_error* e) { return api_->create(&params, &handle_, e); });
  if (!handle_)
    throw Error(ErrorKind::Plugin, "plugin '" + name_ + "': create returned no instance");
  try {
    info_.struct_size = sizeof(info_);
    call("model_info", [&](eg_error* e) { return api_->model_info(handle_, &info_, e); });
    outputs_ = normalise_model_info(name_, *api_, info_);
    if (info_.num_paths < 1 || info_.num_paths > EG_MAX_PATHS)
      throw_plugin("plugin '" + name_ + "' declares " + std::to_string(info_.num_paths) +
                   " paths; 1.." + std::to_string(EG_MAX_PATHS) + " are allowed");
    if (info_.num_buffers < 0 || info_.num_buffers > EG_MAX_BUFFERS)
      throw_plugin("plugin '" + name_ + "' declares " + std::to_string(info_.num_buffers) +
                   " buffers; 0.." + std::to_string(EG_MAX_BUFFERS) + " are allowed");
    if (info_.num_capture_axes < 0 || info_.num_capture_axes > EG_MAX_CAPTURE_AXES)
      throw_plugin("plugin '" + name_ + "' declares " + std::to_string(info_.num_capture_axes) +
                   " capture axes; 0.." + std::to_string(EG_MAX_CAPTURE_AXES) + " are allowed");
    for (int a = 0; a < info_.num_capture_axes; ++a)
      if (info_.capture_axes[a].num_keys <= 0 || !info_.capture_axes[a].keys)
        throw_plugin("plugin '" + name_ + "': capture axis " + std::to_string(a) +
                     " has no keys; every capture axis must list at least one key");
    if (info_.num_capture_axes > 0 && info_.num_paths > 1)
      throw_plugin("plugin '" + name_ +
                   "' combines several paths with capture axes, which encgraph does not "
                   "support yet; declare either paths or capture axes");
    if (info_.num_capture_axes > 0 && !api_->select_axis_keys)
      throw_plugin("plugin '" + name_ + "' declares capture axes but no select_axis_keys");
    for (int b = 0; b < info_.num_buffers; ++b)
      if (info_.buffers[b].padding_logic == EG_PAD_CALLBACK && !api_->pad_buffer)
        throw_plugin("plugin '" + name_ + "': buffer '" +
                     (info_.buffers[b].name ? info_.buffers[b].name : "?") +
                     "' uses callback padding but pad_buffer is NULL");
  } catch (...) {
    api_->destroy(handle_);
    throw;
  }
}

PluginInstance::~PluginInstance() {
  if (handle_) api_->destroy(handle_);
}

// Fields past the table's struct_size are never read: a 1.0 table may end
// right before them.
decltype(eg_plugin_api::prepare_capture_staging) PluginInstance::prepare_capture_staging() const {
  return EG_HAS_FIELD(api_->struct_size, eg_plugin_api, prepare_capture_staging)
             ? api_->prepare_capture_staging
             : nullptr;
}
decltype(eg_plugin_api::output_shape_at) PluginInstance::output_shape_at() const {
  return EG_HAS_FIELD(api_->struct_size, eg_plugin_api, output_shape_at) ? api_->output_shape_at
                                                                         : nullptr;
}
decltype(eg_plugin_api::postprocess_outputs) PluginInstance::postprocess_outputs() const {
  return EG_HAS_FIELD(api_->struct_size, eg_plugin_api, postprocess_outputs)
             ? api_->postprocess_outputs
             : nullptr;
}

bool PluginInstance::concurrent_items() const {
  return EG_HAS_FIELD(api_->struct_size, eg_plugin_api, flags) &&
         (api_->flags & EG_PLUGIN_CONCURRENT_ITEMS) != 0;
}

decltype(eg_plugin_api::item_spec_for_desc) PluginInstance::item_spec_for_desc() const {
  return EG_HAS_FIELD(api_->struct_size, eg_plugin_api, item_spec_for_desc)
             ? api_->item_spec_for_desc
             : nullptr;
}

void PluginInstance::normalise_spec(eg_item_spec& spec, const char* call) const {
  // A 1.0 plugin's one path counts output rows; a 1.1 plugin says its unit.
  if (info_.num_paths == 1 && !writes_path_tokens()) spec.path_tokens[0] = spec.output_tokens;
  for (int p = info_.num_paths; p < EG_MAX_PATHS; ++p) spec.path_tokens[p] = 0;
  const std::string who = "plugin '" + name_ + "': " + call;
  if (spec.frames < 1)
    throw_plugin(who + " gave frames = " + std::to_string(spec.frames) +
                 "; an item has at least one frame (1 for an image)");
  if (spec.output_tokens < 0 || spec.input_size < 0)
    throw_plugin(who + " gave a negative size (output_tokens " +
                 std::to_string(spec.output_tokens) + ", input_size " +
                 std::to_string(spec.input_size) + ")");
  for (int p = 0; p < info_.num_paths; ++p)
    if (spec.path_tokens[p] < 0)
      throw_plugin(who + " gave path_tokens[" + std::to_string(p) +
                   "] = " + std::to_string(spec.path_tokens[p]) + " for path '" +
                   (info_.paths[p].name ? info_.paths[p].name : "?") + "' (" + info_.path_units[p] +
                   "); counts are >= 0");
  int64_t sent = 0;
  for (int p = 0; p < info_.num_paths; ++p) sent += spec.path_tokens[p];
  if (sent == 0 && spec.output_tokens > 0)
    throw_plugin(who + " gave " + std::to_string(spec.output_tokens) +
                 " output rows but no path_tokens; an ABI 1.1 plugin writes path_tokens[p] "
                 "for every path, one path included (in the path's unit)");
}

eg_item* PluginInstance::make_item(const eg_item_desc& desc, eg_item_spec& spec) const {
  eg_item* item = nullptr;
  call("item_create", [&](eg_error* e) { return api_->item_create(handle_, &desc, &item, e); });
  if (!item) throw_plugin("plugin '" + name_ + "': item_create returned no item");
  try {
    spec = eg_item_spec{};
    call("item_spec", [&](eg_error* e) { return api_->item_spec(handle_, item, &spec, e); });
    normalise_spec(spec, "item_spec");
  } catch (...) {
    api_->item_destroy(handle_, item);
    throw;
  }
  return item;
}

eg_item_spec PluginInstance::spec_for(const eg_item_desc& desc) const {
  eg_item_desc geometry = desc;
  geometry.pixels = nullptr;  // the spec depends on the geometry alone
  eg_item_spec spec{};
  if (auto fn = item_spec_for_desc()) {
    call("item_spec_for_desc", [&](eg_error* e) { return fn(handle_, &geometry, &spec, e); });
    normalise_spec(spec, "item_spec_for_desc");
    return spec;
  }
  // No 1.2 entry: a synthetic item of the same geometry has the same spec.
  api_->item_destroy(handle_, make_item(geometry, spec));
  return spec;
}

}  // namespace encgraph
