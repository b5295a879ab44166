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
  v.require_model_type("qwen2_5_vl", {"qwen2_5_vl"});
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

// The folder's preprocessor_config.json: its pixel bounds become the
// defaults (keys override them); its sizes must be the tower's, and its
// normalisation and resampling the ones the plugin implements.
void read_preprocessor(const std::string& path, const VisionConfig& m, Options& o) {
  const encoder_kit::PreprocessorJson j(path, "qwen2_5_vl");
  // Older files say min_pixels/max_pixels; newer ones size.shortest_edge/longest_edge.
  j.read_int("size", o.min_pixels, "shortest_edge");
  j.read_int("size", o.max_pixels, "longest_edge");
  j.read_int("min_pixels", o.min_pixels);
  j.read_int("max_pixels", o.max_pixels);
  const std::string vc = "the tower's vision_config.";
  auto agree = [&](const char* key, const char* config_key, int64_t value) {
    int64_t v = value;
    if (j.read_int(key, v))
      encoder_kit::require_agree("qwen2_5_vl", vc + config_key + " (config.json or keys)", value,
                                 j.where() + key, v);
  };
  agree("patch_size", "patch_size", m.patch_size);
  agree("temporal_patch_size", "temporal_patch_size", m.temporal_patch_size);
  agree("merge_size", "spatial_merge_size", m.spatial_merge_size);
  j.require_floats("qwen2_5_vl", "image_mean", {0.48145466, 0.4578275, 0.40821073});
  j.require_floats("qwen2_5_vl", "image_std", {0.26862954, 0.26130258, 0.27577711});
  int64_t resample = 3;  // PIL's BICUBIC, the processor's default
  if (j.read_int("resample", resample) && resample != 3)
    fail(EG_ERR_UNSUPPORTED, "qwen2_5_vl: " + j.where() + "resample is " +
                                 std::to_string(resample) +
                                 "; this plugin resizes bicubic only (PIL resample 3)");
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
  // A checkpoint folder as plugin.weights brings its config.json (unless
  // config_json names another) and preprocessor_config.json.
  const encoder_kit::CheckpointFolder folder = encoder_kit::checkpoint_folder(p->weights);
  // The sizes the released checkpoints differ in (the others are the same in all).
  encoder_kit::require_folder_config(folder, r,
                                     {"depth", "hidden_size", "num_heads", "intermediate_size",
                                      "out_hidden_size", "fullatt_block_indexes"});
  const auto named = r.get("config_json");
  const bool folder_config = !named && !folder.config.empty();
  o.config_path = named ? *named : folder.config;
  if (named || folder_config) read_config_json(o.config_path, m);
  // Keys override config_json; a key that contradicts the folder's own
  // config.json is an error (the weights beside it have its sizes).
  const encoder_kit::FolderKeys keys(r, "qwen2_5_vl",
                                     folder_config ? folder.config : std::string());
  keys.dim("depth", m.depth);
  keys.dim("hidden_size", m.hidden_size);
  keys.dim("num_heads", m.num_heads);
  keys.dim("intermediate_size", m.intermediate_size);
  keys.dim("out_hidden_size", m.out_hidden_size);
  keys.dim("patch_size", m.patch_size);
  keys.dim("temporal_patch_size", m.temporal_patch_size);
  keys.dim("spatial_merge_size", m.spatial_merge_size);
  keys.dim("window_size", m.window_size);
  keys.dim("in_channels", m.in_channels);
  keys.int_list("fullatt_block_indexes", m.fullatt_block_indexes);
  m.validate();
  if (!folder.preprocessor.empty()) read_preprocessor(folder.preprocessor, m, o);

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
  o.tuning_cache = r.get_string("tuning_cache", o.tuning_cache);
  // (the names in the enums' order)
  o.mlp_kernel = static_cast<MlpKernel>(
      r.get_choice("mlp_kernel", {"auto", "fused", "fused_norm", "cublaslt"}));
  o.qkv_kernel =
      static_cast<QkvKernel>(r.get_choice("qkv_kernel", {"auto", "fused_norm", "cublaslt"}));
  r.reject_unknown();
  return o;
}

}  // namespace qwen
