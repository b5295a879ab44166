#include "qwen_config.hpp"

#include <egk/config.hpp>
#include <egk/config_json.hpp>
#include <egk/error.hpp>
#include <egk/json.hpp>

#include <algorithm>

namespace qwen {
namespace {

using egk::fail;

// The vision_config of a Qwen2.5-VL config.json (or a bare vision config).
void read_config_json(const std::string& path, VisionConfig& c) {
  const egk::VisionConfigJson v(path, "qwen2_5_vl");
  v.read_int("depth", c.depth);
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_heads", c.num_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("out_hidden_size", c.out_hidden_size);
  v.read_int("patch_size", c.patch_size);
  v.read_int("temporal_patch_size", c.temporal_patch_size);
  v.read_int("spatial_merge_size", c.spatial_merge_size);
  v.read_int("window_size", c.window_size);
  v.read_int("in_chans", c.in_channels);  // the released checkpoints' spelling
  v.read_int("in_channels", c.in_channels);
  if (const egk::Json* j = v.find("fullatt_block_indexes")) {
    c.fullatt_block_indexes.clear();
    for (const egk::Json& e : j->as_array("config_json '" + path + "' fullatt_block_indexes"))
      c.fullatt_block_indexes.push_back(e.as_int("fullatt_block_indexes entry"));
  }
  if (const egk::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string("vision_config.hidden_act");
    if (act != "silu")
      fail(EG_ERR_UNSUPPORTED, "config_json '" + path + "': vision_config.hidden_act is '" + act +
                                   "'; the Qwen2.5-VL tower this plugin implements uses 'silu'");
  }
}

}  // namespace

bool VisionConfig::full_attention(int64_t block) const {
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) !=
         fullatt_block_indexes.end();
}

void VisionConfig::validate() const {
  auto positive = [](const char* name, int64_t v) { egk::require_positive("qwen2_5_vl", name, v); };
  positive("depth", depth);
  positive("hidden_size", hidden_size);
  positive("num_heads", num_heads);
  positive("intermediate_size", intermediate_size);
  positive("out_hidden_size", out_hidden_size);
  positive("patch_size", patch_size);
  positive("temporal_patch_size", temporal_patch_size);
  positive("spatial_merge_size", spatial_merge_size);
  positive("window_size", window_size);
  positive("in_channels", in_channels);
  if (hidden_size % num_heads != 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: hidden_size " + std::to_string(hidden_size) +
                                      " is not a multiple of num_heads " +
                                      std::to_string(num_heads));
  if (head_dim() % 4 != 0)
    fail(
        EG_ERR_INVALID_ARGUMENT,
        "qwen2_5_vl: head_dim " + std::to_string(head_dim()) +
            " must be a multiple of 4 (2-D rotary: half the dims, split between rows and columns)");
  if (window_size % (spatial_merge_size * patch_size) != 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: window_size " + std::to_string(window_size) +
                                      " must be a multiple of spatial_merge_size * patch_size = " +
                                      std::to_string(spatial_merge_size * patch_size));
  for (int64_t b : fullatt_block_indexes)
    if (b < 0 || b >= depth)
      fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: fullatt_block_indexes entry " + std::to_string(b) +
                                        " is outside [0, depth=" + std::to_string(depth) + ")");
  if (in_channels != 3)
    fail(EG_ERR_UNSUPPORTED,
         "qwen2_5_vl: in_channels must be 3 (RGB), got " + std::to_string(in_channels));
}

Options parse_options(const eg_create_params* p) {
  Options o;
  egk::ConfigReader r(p->config, p->num_config, "qwen2_5_vl");
  VisionConfig& m = o.model;
  if (auto path = r.get("config_json")) read_config_json(*path, m);
  m.depth = r.get_int("depth", m.depth);
  m.hidden_size = r.get_int("hidden_size", m.hidden_size);
  m.num_heads = r.get_int("num_heads", m.num_heads);
  m.intermediate_size = r.get_int("intermediate_size", m.intermediate_size);
  m.out_hidden_size = r.get_int("out_hidden_size", m.out_hidden_size);
  m.patch_size = r.get_int("patch_size", m.patch_size);
  m.temporal_patch_size = r.get_int("temporal_patch_size", m.temporal_patch_size);
  m.spatial_merge_size = r.get_int("spatial_merge_size", m.spatial_merge_size);
  m.window_size = r.get_int("window_size", m.window_size);
  m.in_channels = r.get_int("in_channels", m.in_channels);
  m.fullatt_block_indexes = r.get_int_list("fullatt_block_indexes", m.fullatt_block_indexes);
  m.validate();

  o.dtype = egk::read_compute_dtype(r, p->device);

  o.min_pixels = r.get_int("min_pixels", o.min_pixels);
  o.max_pixels = r.get_int("max_pixels", o.max_pixels);
  if (o.min_pixels <= 0 || o.max_pixels < o.min_pixels)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: need 0 < min_pixels <= max_pixels, got " +
                                      std::to_string(o.min_pixels) + " and " +
                                      std::to_string(o.max_pixels));
  const int64_t unit_pixels = m.resize_factor() * m.resize_factor();
  o.min_budget = r.get_int("min_budget", o.min_budget);
  o.max_budget = r.get_int("max_budget", std::max<int64_t>(o.max_pixels / unit_pixels, 1));
  if (o.min_budget <= 0 || o.max_budget < o.min_budget)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: need 0 < min_budget <= max_budget");
  o.max_frames_per_video = r.get_int("max_frames_per_video", o.max_frames_per_video);
  if (o.max_frames_per_video <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: max_frames_per_video must be positive");
  o.seed = static_cast<uint64_t>(r.get_int("seed", 0));
  o.tune_gemm = r.get_bool("tune_gemm", o.tune_gemm);
  r.reject_unknown();
  return o;
}

}  // namespace qwen
