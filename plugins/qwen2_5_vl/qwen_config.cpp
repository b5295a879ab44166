#include "qwen_config.hpp"

#include <encoder_kit/config.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <algorithm>
#include <limits>

namespace qwen {
namespace {

using encoder_kit::fail;

// Pixels per frame (65536 x 65536) and output tokens per graph: bounds that
// keep every product of them with the tower's sizes inside 64 bits.
constexpr int64_t kMaxPixels = int64_t{1} << 32;
constexpr int64_t kMaxBudget = int64_t{1} << 24;

// The vision_config of a Qwen2.5-VL config.json (or a bare vision config).
void read_config_json(const std::string& path, VisionConfig& c) {
  const encoder_kit::VisionConfigJson v(path, "qwen2_5_vl");
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
  if (const encoder_kit::Json* j = v.find("fullatt_block_indexes")) {
    c.fullatt_block_indexes.clear();
    for (const encoder_kit::Json& e :
         j->as_array("config_json '" + path + "' fullatt_block_indexes"))
      c.fullatt_block_indexes.push_back(e.as_int("fullatt_block_indexes entry"));
  }
  if (const encoder_kit::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string("vision_config.hidden_act");
    if (act != "silu")
      fail(EG_ERR_INVALID_ARGUMENT,
           "config_json '" + path + "': vision_config.hidden_act is '" + act +
               "'; the Qwen2.5-VL tower this plugin implements uses 'silu'");
  }
}

}  // namespace

bool VisionConfig::full_attention(int64_t block) const {
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) !=
         fullatt_block_indexes.end();
}

void VisionConfig::validate() const {
  // Bounds far above every released tower that keep each size product the
  // plugin computes (patch rows x patch_dim, weights, workspaces) inside 64 bits.
  auto range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    encoder_kit::require_in_range("qwen2_5_vl", name, v, lo, hi);
  };
  range("depth", depth, 1, 1024);
  range("hidden_size", hidden_size, 1, 65536);
  range("num_heads", num_heads, 1, 1024);
  range("intermediate_size", intermediate_size, 1, 262144);
  range("out_hidden_size", out_hidden_size, 1, 65536);
  range("patch_size", patch_size, 1, 512);
  range("temporal_patch_size", temporal_patch_size, 1, 16);
  range("spatial_merge_size", spatial_merge_size, 1, 16);
  range("window_size", window_size, 1, 65536);
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
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: in_channels must be 3 (RGB), got " + std::to_string(in_channels));
}

Options parse_options(const eg_create_params* p) {
  Options o;
  encoder_kit::ConfigReader r(p->config, p->num_config, "qwen2_5_vl");
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

  o.dtype = encoder_kit::read_compute_dtype(r, p->device);

  o.min_pixels = r.get_int("min_pixels", o.min_pixels);
  o.max_pixels = r.get_int("max_pixels", o.max_pixels);
  encoder_kit::require_in_range("qwen2_5_vl", "min_pixels", o.min_pixels, 1, kMaxPixels);
  encoder_kit::require_in_range("qwen2_5_vl", "max_pixels", o.max_pixels, o.min_pixels, kMaxPixels);
  const int64_t unit_pixels = m.resize_factor() * m.resize_factor();
  o.min_budget = r.get_int("min_budget", o.min_budget);
  o.max_budget =
      r.get_int("max_budget", std::clamp<int64_t>(o.max_pixels / unit_pixels, 1, kMaxBudget));
  encoder_kit::require_in_range("qwen2_5_vl", "min_budget", o.min_budget, 1, kMaxBudget);
  encoder_kit::require_in_range("qwen2_5_vl", "max_budget", o.max_budget, o.min_budget, kMaxBudget);
  if (o.max_budget * m.merge_unit() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: max_budget " + std::to_string(o.max_budget) + " x spatial_merge_size^2 " +
             std::to_string(m.merge_unit()) +
             " patch rows per graph overflow the int32 sequence offsets: lower max_budget");
  o.max_frames_per_video = r.get_int("max_frames_per_video", o.max_frames_per_video);
  encoder_kit::require_in_range("qwen2_5_vl", "max_frames_per_video", o.max_frames_per_video, 1,
                                65536);
  o.check_finite = encoder_kit::read_check_finite(r);
  o.seed = static_cast<uint64_t>(r.get_int("seed", 0));
  o.tune_gemm = r.get_bool("tune_gemm", o.tune_gemm);
  r.reject_unknown();
  return o;
}

}  // namespace qwen
