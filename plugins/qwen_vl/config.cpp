#include "config.hpp"

#include "folder_config.hpp"
#include "spec.hpp"

#include <encoder_kit/config.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace qwen_vl {
namespace {

using encoder_kit::fail;

// Pixels per frame (65536 x 65536) and output tokens per graph: bounds that
// keep every product of them with the tower's sizes inside 64 bits.
constexpr int64_t kMaxPixels = int64_t{1} << 32;
constexpr int64_t kMaxBudget = int64_t{1} << 24;

// Every entry of `blocks` names a block of the tower, once.
void check_block_list(const std::string& who, const char* key, const std::vector<int64_t>& blocks,
                      int64_t depth, bool unique) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t b = blocks[i];
    if (b < 0 || b >= depth)
      fail(EG_ERR_INVALID_ARGUMENT, who + ": " + key + " entry " + std::to_string(b) +
                                        " is outside [0, depth=" + std::to_string(depth) + ")");
    if (unique && std::find(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(i), b) !=
                      blocks.begin() + static_cast<std::ptrdiff_t>(i))
      fail(EG_ERR_INVALID_ARGUMENT,
           who + ": " + key + " lists block " + std::to_string(b) + " twice");
  }
}

// The tower's sizes from the plugin keys, each overriding config_json; a key
// that contradicts the folder's own config.json is an error (the weights
// beside it have its sizes). Read in the order the checks report.
void read_size_keys(const encoder_kit::FolderKeys& keys, const Spec& s, VisionConfig& m) {
  keys.dim("depth", m.depth);
  keys.dim("hidden_size", m.hidden_size);
  keys.dim("num_heads", m.num_heads);
  keys.dim("intermediate_size", m.intermediate_size);
  keys.dim("out_hidden_size", m.out_hidden_size);
  keys.dim("patch_size", m.patch_size);
  keys.dim("temporal_patch_size", m.temporal_patch_size);
  keys.dim("spatial_merge_size", m.spatial_merge_size);
  if (s.attention == Attention::Windowed) keys.dim("window_size", m.window_size);
  keys.dim("in_channels", m.in_channels);
  if (s.pos_embed == PosEmbed::Interpolated)
    keys.dim("num_position_embeddings", m.num_position_embeddings);
  if (s.attention == Attention::Windowed)
    keys.int_list("fullatt_block_indexes", m.fullatt_block_indexes);
  if (s.outputs == Outputs::Deepstack)
    keys.int_list("deepstack_visual_indexes", m.deepstack_visual_indexes);
}

// The pixel, budget and frame keys, bounded against each other and the tower.
void read_budget_keys(encoder_kit::ConfigReader& r, Options& o) {
  const Spec& s = o.spec();
  const std::string who = s.name;
  const VisionConfig& m = o.model;
  auto pixels = [&](const char* lo_key, int64_t& lo, const char* hi_key, int64_t& hi) {
    lo = r.get_int(lo_key, lo);
    hi = r.get_int(hi_key, hi);
    encoder_kit::require_in_range(who, lo_key, lo, 1, kMaxPixels);
    encoder_kit::require_in_range(who, hi_key, hi, lo, kMaxPixels);
  };
  pixels("min_pixels", o.min_pixels, "max_pixels", o.max_pixels);
  if (s.video_pixels == VideoPixels::AllFrames)
    pixels("video_min_pixels", o.video_min_pixels, "video_max_pixels", o.video_max_pixels);
  const int64_t unit_pixels = m.resize_factor() * m.resize_factor();
  o.min_budget = r.get_int("min_budget", o.min_budget);
  const auto max_budget_key = r.get("max_budget");
  o.max_budget =
      r.get_int("max_budget", std::clamp<int64_t>(o.max_pixels / unit_pixels, 1, kMaxBudget));
  encoder_kit::require_in_range(who, "min_budget", o.min_budget, 1, kMaxBudget);
  // Without the key the largest budget is the tokens of a max_pixels image:
  // name what made it, not a key the user never set.
  if (!max_budget_key && o.max_budget < o.min_budget)
    fail(EG_ERR_INVALID_ARGUMENT, who + ": a max_pixels image (" + std::to_string(o.max_pixels) +
                                      " pixels at " + std::to_string(m.resize_factor()) + " x " +
                                      std::to_string(m.resize_factor()) +
                                      " pixels per token) gives " + std::to_string(o.max_budget) +
                                      " tokens, below min_budget " + std::to_string(o.min_budget) +
                                      ": raise max_pixels or lower min_budget");
  encoder_kit::require_in_range(who, "max_budget", o.max_budget, o.min_budget, kMaxBudget);
  if (o.max_budget * m.merge_unit() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         who + ": max_budget " + std::to_string(o.max_budget) + " x spatial_merge_size^2 " +
             std::to_string(m.merge_unit()) +
             " patch rows per graph overflow the int32 sequence offsets: lower max_budget");
  o.max_frames_per_video = r.get_int("max_frames_per_video", o.max_frames_per_video);
  // Under the video processor's rule a video holds at least one temporal
  // patch of frames (fewer are refused).
  const int64_t min_frames = s.video_pixels == VideoPixels::AllFrames ? m.temporal_patch_size : 1;
  encoder_kit::require_in_range(who, "max_frames_per_video", o.max_frames_per_video, min_frames,
                                65536);
}

}  // namespace

VisionConfig::VisionConfig(const Spec& s) : VisionConfig(s.tower) {
  spec = &s;
}

Options::Options(const Spec& s)
    : model(s),
      min_pixels(s.min_pixels),
      max_pixels(s.max_pixels),
      video_min_pixels(s.video_min_pixels),
      video_max_pixels(s.video_max_pixels) {}

int64_t VisionConfig::window_units() const {
  return spec->attention == Attention::Windowed ? window_size / spatial_merge_size / patch_size : 0;
}

bool VisionConfig::full_attention(int64_t block) const {
  return spec->attention == Attention::Full ||
         std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) !=
             fullatt_block_indexes.end();
}

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
  const Spec& s = *spec;
  const std::string who = s.name;
  // Bounds far above every released tower that keep each size product the
  // plugin computes (patch rows x patch_dim, weights, workspaces) inside 64 bits.
  auto range = [&](const char* name, int64_t v, int64_t lo, int64_t hi) {
    encoder_kit::require_in_range(who, name, v, lo, hi);
  };
  range("depth", depth, 1, 1024);
  range("hidden_size", hidden_size, 1, 65536);
  range("num_heads", num_heads, 1, 1024);
  range("intermediate_size", intermediate_size, 1, 262144);
  range("out_hidden_size", out_hidden_size, 1, 65536);
  range("patch_size", patch_size, 1, 512);
  range("temporal_patch_size", temporal_patch_size, 1, 16);
  range("spatial_merge_size", spatial_merge_size, 1, 16);
  if (s.attention == Attention::Windowed) range("window_size", window_size, 1, 65536);
  if (s.pos_embed == PosEmbed::Interpolated)
    range("num_position_embeddings", num_position_embeddings, 1, int64_t{1} << 20);
  if (hidden_size % num_heads != 0)
    fail(EG_ERR_INVALID_ARGUMENT, who + ": hidden_size " + std::to_string(hidden_size) +
                                      " is not a multiple of num_heads " +
                                      std::to_string(num_heads));
  if (head_dim() % 4 != 0)
    fail(
        EG_ERR_INVALID_ARGUMENT,
        who + ": head_dim " + std::to_string(head_dim()) +
            " must be a multiple of 4 (2-D rotary: half the dims, split between rows and columns)");
  if (s.attention == Attention::Windowed) {
    if (window_size % (spatial_merge_size * patch_size) != 0)
      fail(EG_ERR_INVALID_ARGUMENT,
           who + ": window_size " + std::to_string(window_size) +
               " must be a multiple of spatial_merge_size * patch_size = " +
               std::to_string(spatial_merge_size * patch_size));
    check_block_list(who, "fullatt_block_indexes", fullatt_block_indexes, depth, false);
  }
  if (s.pos_embed == PosEmbed::Interpolated && pos_grid() * pos_grid() != num_position_embeddings)
    fail(EG_ERR_INVALID_ARGUMENT, who + ": num_position_embeddings " +
                                      std::to_string(num_position_embeddings) +
                                      " must be a square (the learned grid is N x N)");
  if (in_channels != 3)
    fail(EG_ERR_INVALID_ARGUMENT,
         who + ": in_channels must be 3 (RGB), got " + std::to_string(in_channels));
  if (s.outputs == Outputs::Deepstack) {
    if (num_deepstack() + 1 > EG_MAX_OUTPUTS)
      fail(EG_ERR_INVALID_ARGUMENT, who + ": " + std::to_string(num_deepstack()) +
                                        " deepstack_visual_indexes give more than the ABI's " +
                                        std::to_string(EG_MAX_OUTPUTS) + " outputs");
    check_block_list(who, "deepstack_visual_indexes", deepstack_visual_indexes, depth, true);
  }
}

Options parse_options(const Spec& s, const eg_create_params* p) {
  Options o(s);
  encoder_kit::ConfigReader r(p->config, p->num_config, s.name);
  VisionConfig& m = o.model;
  // A checkpoint folder as plugin.weights brings its config.json (unless
  // config_json names another) and its processors' configs.
  const encoder_kit::CheckpointFolder folder = encoder_kit::checkpoint_folder(p->weights);
  // The sizes the released checkpoints differ in (the others are the same in all).
  if (s.attention == Attention::Windowed)
    encoder_kit::require_folder_config(folder, r,
                                       {"depth", "hidden_size", "num_heads", "intermediate_size",
                                        "out_hidden_size", "fullatt_block_indexes"});
  else
    encoder_kit::require_folder_config(
        folder, r,
        {"depth", "hidden_size", "num_heads", "intermediate_size", "out_hidden_size",
         "num_position_embeddings", "deepstack_visual_indexes"});
  const auto named = r.get("config_json");
  const bool folder_config = !named && !folder.config.empty();
  o.config_path = named ? *named : folder.config;
  if (named || folder_config) read_config_json(o.config_path, m);
  read_size_keys(encoder_kit::FolderKeys(r, s.name, folder_config ? folder.config : std::string()),
                 s, m);
  m.validate();
  read_processor_configs(folder, o);

  o.dtype = encoder_kit::read_compute_dtype(r, p->device);
  read_budget_keys(r, o);
  o.check_finite = encoder_kit::read_check_finite(r);
  o.seed = static_cast<uint64_t>(r.get_int("seed", 0));
  o.tune_gemm = r.get_bool("tune_gemm", o.tune_gemm);
  o.tuning_cache = r.get_string("tuning_cache", o.tuning_cache);
  if (s.mlp == Mlp::GatedSilu) {
    // (the names in the enums' order)
    o.mlp_kernel = static_cast<MlpKernel>(
        r.get_choice("mlp_kernel", {"auto", "fused", "fused_norm", "cublaslt"}));
    o.qkv_kernel =
        static_cast<QkvKernel>(r.get_choice("qkv_kernel", {"auto", "fused_norm", "cublaslt"}));
  }
  r.reject_unknown();
  return o;
}

}  // namespace qwen_vl
