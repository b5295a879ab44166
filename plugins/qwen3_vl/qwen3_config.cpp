#include "qwen3_config.hpp"

#include <encoder_kit/config.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace qwen3 {
namespace {

using encoder_kit::fail;

constexpr int64_t kMaxPixels = int64_t{1} << 32;
constexpr int64_t kMaxBudget = int64_t{1} << 24;

void read_config_json(const std::string& path, VisionConfig& c) {
  const encoder_kit::VisionConfigJson v(path, "qwen3_vl");
  v.require_model_type("qwen3_vl", {"qwen3_vl", "qwen3_vl_moe"});
  v.read_int("depth", c.depth);
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_heads", c.num_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("out_hidden_size", c.out_hidden_size);
  v.read_int("patch_size", c.patch_size);
  v.read_int("temporal_patch_size", c.temporal_patch_size);
  v.read_int("spatial_merge_size", c.spatial_merge_size);
  v.read_int("in_channels", c.in_channels);
  v.read_int("num_position_embeddings", c.num_position_embeddings);
  if (const encoder_kit::Json* j = v.find("deepstack_visual_indexes")) {
    c.deepstack_visual_indexes.clear();
    for (const encoder_kit::Json& e : j->as_array(v.where() + "deepstack_visual_indexes"))
      c.deepstack_visual_indexes.push_back(e.as_int("deepstack_visual_indexes entry"));
  }
  if (const encoder_kit::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string("vision_config.hidden_act");
    if (act != "gelu_pytorch_tanh")
      fail(EG_ERR_INVALID_ARGUMENT, v.where() + "hidden_act is '" + act +
                                        "'; the Qwen3-VL tower this plugin implements uses "
                                        "'gelu_pytorch_tanh'");
  }
}

// What preprocessor_config.json and video_preprocessor_config.json share:
// their sizes must be the tower's, and their normalisation and resampling the
// ones the plugin implements.
void check_processor_agrees(const encoder_kit::PreprocessorJson& j, const VisionConfig& m) {
  const std::string vc = "the tower's vision_config.";
  auto agree = [&](const char* key, const char* config_key, int64_t value) {
    int64_t v = value;
    if (j.read_int(key, v))
      encoder_kit::require_agree("qwen3_vl", vc + config_key + " (config.json or keys)", value,
                                 j.where() + key, v);
  };
  agree("patch_size", "patch_size", m.patch_size);
  agree("temporal_patch_size", "temporal_patch_size", m.temporal_patch_size);
  agree("merge_size", "spatial_merge_size", m.spatial_merge_size);
  j.require_floats("qwen3_vl", "image_mean", {0.5, 0.5, 0.5});
  j.require_floats("qwen3_vl", "image_std", {0.5, 0.5, 0.5});
  int64_t resample = 3;  // PIL's BICUBIC, the processor's default
  if (j.read_int("resample", resample) && resample != 3)
    fail(EG_ERR_UNSUPPORTED, "qwen3_vl: " + j.where() + "resample is " + std::to_string(resample) +
                                 "; this plugin resizes bicubic only (PIL resample 3)");
}

// The folder's preprocessor_config.json: its pixel bounds become the image
// defaults (keys override them).
void read_preprocessor(const std::string& path, const VisionConfig& m, Options& o) {
  const encoder_kit::PreprocessorJson j(path, "qwen3_vl");
  j.read_int("size", o.min_pixels, "shortest_edge");
  j.read_int("size", o.max_pixels, "longest_edge");
  j.read_int("min_pixels", o.min_pixels);
  j.read_int("max_pixels", o.max_pixels);
  check_processor_agrees(j, m);
}

// The folder's video_preprocessor_config.json: Qwen3VLVideoProcessor's size
// bounds all frames of a video together; they become the video defaults
// (video_min_pixels / video_max_pixels override them).
void read_video_preprocessor(const std::string& path, const VisionConfig& m, Options& o) {
  const encoder_kit::PreprocessorJson j(path, "qwen3_vl");
  j.read_int("size", o.video_min_pixels, "shortest_edge");
  j.read_int("size", o.video_max_pixels, "longest_edge");
  check_processor_agrees(j, m);
}

}  // namespace

int64_t VisionConfig::pos_grid() const {
  return static_cast<int64_t>(
      std::llround(std::sqrt(static_cast<double>(num_position_embeddings))));
}

int64_t VisionConfig::deepstack_slot(int64_t layer) const {
  // deepstack_features is appended in layer order.
  int64_t slot = 0;
  bool found = false;
  for (int64_t l : deepstack_visual_indexes) {
    if (l == layer) found = true;
    if (l < layer) ++slot;
  }
  return found ? slot : -1;
}

int64_t VisionConfig::deepstack_merger(int64_t slot) const {
  std::vector<int64_t> sorted = deepstack_visual_indexes;
  std::sort(sorted.begin(), sorted.end());
  const int64_t layer = sorted[static_cast<size_t>(slot)];
  return std::find(deepstack_visual_indexes.begin(), deepstack_visual_indexes.end(), layer) -
         deepstack_visual_indexes.begin();
}

void VisionConfig::validate() const {
  auto range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    encoder_kit::require_in_range("qwen3_vl", name, v, lo, hi);
  };
  range("depth", depth, 1, 1024);
  range("hidden_size", hidden_size, 1, 65536);
  range("num_heads", num_heads, 1, 1024);
  range("intermediate_size", intermediate_size, 1, 262144);
  range("out_hidden_size", out_hidden_size, 1, 65536);
  range("patch_size", patch_size, 1, 512);
  range("temporal_patch_size", temporal_patch_size, 1, 16);
  range("spatial_merge_size", spatial_merge_size, 1, 16);
  range("num_position_embeddings", num_position_embeddings, 1, int64_t{1} << 20);
  if (hidden_size % num_heads != 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: hidden_size " + std::to_string(hidden_size) +
                                      " is not a multiple of num_heads " +
                                      std::to_string(num_heads));
  if (head_dim() % 4 != 0)
    fail(
        EG_ERR_INVALID_ARGUMENT,
        "qwen3_vl: head_dim " + std::to_string(head_dim()) +
            " must be a multiple of 4 (2-D rotary: half the dims, split between rows and columns)");
  if (pos_grid() * pos_grid() != num_position_embeddings)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: num_position_embeddings " +
                                      std::to_string(num_position_embeddings) +
                                      " must be a square (the learned grid is N x N)");
  if (in_channels != 3)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: in_channels must be 3 (RGB), got " + std::to_string(in_channels));
  if (num_deepstack() + 1 > EG_MAX_OUTPUTS)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: " + std::to_string(num_deepstack()) +
                                      " deepstack_visual_indexes give more than the ABI's " +
                                      std::to_string(EG_MAX_OUTPUTS) + " outputs");
  for (size_t i = 0; i < deepstack_visual_indexes.size(); ++i) {
    const int64_t b = deepstack_visual_indexes[i];
    if (b < 0 || b >= depth)
      fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: deepstack_visual_indexes entry " +
                                        std::to_string(b) +
                                        " is outside [0, depth=" + std::to_string(depth) + ")");
    for (size_t j = 0; j < i; ++j)
      if (deepstack_visual_indexes[j] == b)
        fail(EG_ERR_INVALID_ARGUMENT,
             "qwen3_vl: deepstack_visual_indexes lists block " + std::to_string(b) + " twice");
  }
}

Options parse_options(const eg_create_params* p) {
  Options o;
  encoder_kit::ConfigReader r(p->config, p->num_config, "qwen3_vl");
  VisionConfig& m = o.model;
  // A checkpoint folder as plugin.weights brings its config.json (unless
  // config_json names another) and preprocessor_config.json.
  const encoder_kit::CheckpointFolder folder = encoder_kit::checkpoint_folder(p->weights);
  // The sizes the released checkpoints differ in (the others are the same in all).
  encoder_kit::require_folder_config(
      folder, r,
      {"depth", "hidden_size", "num_heads", "intermediate_size", "out_hidden_size",
       "num_position_embeddings", "deepstack_visual_indexes"});
  const auto named = r.get("config_json");
  const bool folder_config = !named && !folder.config.empty();
  o.config_path = named ? *named : folder.config;
  if (named || folder_config) read_config_json(o.config_path, m);
  // Keys override config_json; a key that contradicts the folder's own
  // config.json is an error (the weights beside it have its sizes).
  const encoder_kit::FolderKeys keys(r, "qwen3_vl", folder_config ? folder.config : std::string());
  keys.dim("depth", m.depth);
  keys.dim("hidden_size", m.hidden_size);
  keys.dim("num_heads", m.num_heads);
  keys.dim("intermediate_size", m.intermediate_size);
  keys.dim("out_hidden_size", m.out_hidden_size);
  keys.dim("patch_size", m.patch_size);
  keys.dim("temporal_patch_size", m.temporal_patch_size);
  keys.dim("spatial_merge_size", m.spatial_merge_size);
  keys.dim("in_channels", m.in_channels);
  keys.dim("num_position_embeddings", m.num_position_embeddings);
  keys.int_list("deepstack_visual_indexes", m.deepstack_visual_indexes);
  m.validate();
  if (!folder.preprocessor.empty()) read_preprocessor(folder.preprocessor, m, o);
  if (!folder.video_preprocessor.empty()) read_video_preprocessor(folder.video_preprocessor, m, o);

  o.dtype = encoder_kit::read_compute_dtype(r, p->device);
  auto pixels = [&](const char* lo_key, int64_t& lo, const char* hi_key, int64_t& hi) {
    lo = r.get_int(lo_key, lo);
    hi = r.get_int(hi_key, hi);
    encoder_kit::require_in_range("qwen3_vl", lo_key, lo, 1, kMaxPixels);
    encoder_kit::require_in_range("qwen3_vl", hi_key, hi, lo, kMaxPixels);
  };
  pixels("min_pixels", o.min_pixels, "max_pixels", o.max_pixels);
  pixels("video_min_pixels", o.video_min_pixels, "video_max_pixels", o.video_max_pixels);
  const int64_t unit_pixels = m.resize_factor() * m.resize_factor();
  o.min_budget = r.get_int("min_budget", o.min_budget);
  const auto max_budget_key = r.get("max_budget");
  o.max_budget =
      r.get_int("max_budget", std::clamp<int64_t>(o.max_pixels / unit_pixels, 1, kMaxBudget));
  encoder_kit::require_in_range("qwen3_vl", "min_budget", o.min_budget, 1, kMaxBudget);
  // Without the key the largest budget is the tokens of a max_pixels image:
  // name what made it, not a key the user never set.
  if (!max_budget_key && o.max_budget < o.min_budget)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: a max_pixels image (" + std::to_string(o.max_pixels) +
                                      " pixels at " + std::to_string(m.resize_factor()) + " x " +
                                      std::to_string(m.resize_factor()) +
                                      " pixels per token) gives " + std::to_string(o.max_budget) +
                                      " tokens, below min_budget " + std::to_string(o.min_budget) +
                                      ": raise max_pixels or lower min_budget");
  encoder_kit::require_in_range("qwen3_vl", "max_budget", o.max_budget, o.min_budget, kMaxBudget);
  if (o.max_budget * m.merge_unit() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: max_budget " + std::to_string(o.max_budget) + " x spatial_merge_size^2 " +
             std::to_string(m.merge_unit()) +
             " patch rows per graph overflow the int32 sequence offsets: lower max_budget");
  o.max_frames_per_video = r.get_int("max_frames_per_video", o.max_frames_per_video);
  // A video holds at least one temporal patch of frames (fewer are refused).
  encoder_kit::require_in_range("qwen3_vl", "max_frames_per_video", o.max_frames_per_video,
                                m.temporal_patch_size, 65536);
  o.check_finite = encoder_kit::read_check_finite(r);
  o.seed = static_cast<uint64_t>(r.get_int("seed", 0));
  o.tune_gemm = r.get_bool("tune_gemm", o.tune_gemm);
  o.tuning_cache = r.get_string("tuning_cache", o.tuning_cache);
  r.reject_unknown();
  return o;
}

}  // namespace qwen3
