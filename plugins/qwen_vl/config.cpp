#include "config.hpp"

#include "spec.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>

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

// Entries of the learned grid of an `image_size` tower (Glm4vVisionEmbeddings:
// (image_size // patch_size)^2).
int64_t position_grid_entries(const Spec& s, int64_t image_size, int64_t patch_size) {
  if (patch_size <= 0 || image_size < patch_size || image_size > (int64_t{1} << 16))
    fail(EG_ERR_INVALID_ARGUMENT,
         std::string(s.name) + ": image_size " + std::to_string(image_size) +
             " must be in [patch_size = " + std::to_string(patch_size) + ", 65536]");
  const int64_t side = image_size / patch_size;
  return side * side;
}

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
void read_size_keys(const encoder_kit::CheckpointKeys& keys, const Spec& s, VisionConfig& m) {
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
  if (s.pos_embed == PosEmbed::Bicubic) {
    // config.json's image_size gives the grid (image_size / patch_size per side).
    int64_t image_size = m.pos_grid() * m.patch_size;
    keys.dim("image_size", image_size);
    m.num_position_embeddings = position_grid_entries(s, image_size, m.patch_size);
  }
  if (s.attention == Attention::Windowed)
    keys.int_list("fullatt_block_indexes", m.fullatt_block_indexes);
  if (s.outputs == Outputs::Deepstack)
    keys.int_list("deepstack_visual_indexes", m.deepstack_visual_indexes);
}

// The pixel, budget and frame keys, bounded against each other and the tower.
void read_budget_keys(sdk::Config& r, Options& o) {
  const Spec& s = o.spec();
  const std::string who = s.name;
  const VisionConfig& m = o.model;
  auto pixels = [&](const char* lo_key, int64_t& lo, const char* hi_key, int64_t& hi) {
    lo = r.get<int64_t>(lo_key, lo);
    hi = r.get<int64_t>(hi_key, hi);
    encoder_kit::require_in_range(who, lo_key, lo, 1, kMaxPixels);
    encoder_kit::require_in_range(who, hi_key, hi, lo, kMaxPixels);
  };
  pixels("min_pixels", o.min_pixels, "max_pixels", o.max_pixels);
  if (s.video_pixels == VideoPixels::AllFrames)
    pixels("video_min_pixels", o.video_min_pixels, "video_max_pixels", o.video_max_pixels);
  // Under ImagePixels::AsTemporalPatch max_pixels counts the image's
  // temporal_patch_size copies.
  const int64_t copies = s.image_pixels == ImagePixels::AsTemporalPatch ? m.temporal_patch_size : 1;
  const int64_t unit_pixels = m.resize_factor() * m.resize_factor() * copies;
  o.min_budget = r.get<int64_t>("min_budget", o.min_budget);
  const bool max_budget_key = r.has("max_budget");
  o.max_budget =
      r.get<int64_t>("max_budget", std::clamp<int64_t>(o.max_pixels / unit_pixels, 1, kMaxBudget));
  encoder_kit::require_in_range(who, "min_budget", o.min_budget, 1, kMaxBudget);
  // Without the key the largest budget is the tokens of a max_pixels image:
  // name what made it, not a key the user never set.
  if (!max_budget_key && o.max_budget < o.min_budget)
    fail(EG_ERR_INVALID_ARGUMENT, who + ": a max_pixels image (" + std::to_string(o.max_pixels) +
                                      " pixels at " + std::to_string(unit_pixels) +
                                      " pixels per token) gives " + std::to_string(o.max_budget) +
                                      " tokens, below min_budget " + std::to_string(o.min_budget) +
                                      ": raise max_pixels or lower min_budget");
  encoder_kit::require_in_range(who, "max_budget", o.max_budget, o.min_budget, kMaxBudget);
  if (o.max_budget * m.merge_unit() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         who + ": max_budget " + std::to_string(o.max_budget) + " x spatial_merge_size^2 " +
             std::to_string(m.merge_unit()) +
             " patch rows per graph overflow the int32 sequence offsets: lower max_budget");
  o.max_frames_per_video = r.get<int64_t>("max_frames_per_video", o.max_frames_per_video);
  // Under the video processor's rule a video holds at least one temporal
  // patch of frames (fewer are refused).
  const int64_t min_frames = s.video_pixels == VideoPixels::AllFrames ? m.temporal_patch_size : 1;
  encoder_kit::require_in_range(who, "max_frames_per_video", o.max_frames_per_video, min_frames,
                                65536);
}

// The files of a Hugging Face checkpoint folder that configure the tower:
// config.json's vision_config (sizes), and the processors' configs (pixel
// bounds, checked against the sizes and the normalisation the plugin
// implements).

// Sets `out` to the integer list at `key`, when present.
void read_int_list(const encoder_kit::VisionConfigJson& v, const char* key,
                   std::vector<int64_t>& out) {
  const encoder_kit::Json* j = v.find(key);
  if (!j) return;
  out.clear();
  for (const encoder_kit::Json& e : j->as_array(v.where() + key))
    out.push_back(e.as_int(std::string(key) + " entry"));
}

// What every processor config of the folder must say: the tower's sizes, and
// the normalisation and resampling the plugin implements.
void check_processor_agrees(const encoder_kit::PreprocessorJson& j, const VisionConfig& m) {
  const Spec& s = *m.spec;
  const std::string vc = "the tower's vision_config.";
  auto agree = [&](const char* key, const char* config_key, int64_t value) {
    int64_t v = value;
    if (j.read_int(key, v))
      encoder_kit::require_agree(s.name, vc + config_key + " (config.json or keys)", value,
                                 j.where() + key, v);
  };
  agree("patch_size", "patch_size", m.patch_size);
  agree("temporal_patch_size", "temporal_patch_size", m.temporal_patch_size);
  agree("merge_size", "spatial_merge_size", m.spatial_merge_size);
  j.require_floats(s.name, "image_mean", {s.image_mean.begin(), s.image_mean.end()});
  j.require_floats(s.name, "image_std", {s.image_std.begin(), s.image_std.end()});
  int64_t resample = 3;  // PIL's BICUBIC, the processor's default
  if (j.read_int("resample", resample) && resample != 3)
    fail(EG_ERR_UNSUPPORTED, std::string(s.name) + ": " + j.where() + "resample is " +
                                 std::to_string(resample) +
                                 "; this plugin resizes bicubic only (PIL resample 3)");
}

// Reads config.json (or a bare vision config) at `path` into `c`, refusing
// another model type or activation than the version's.
void read_config_json(const std::string& path, VisionConfig& c) {
  const Spec& s = *c.spec;
  const encoder_kit::VisionConfigJson v(path, s.name);
  if (s.model_types[1])
    v.require_model_type(s.name, {s.model_types[0], s.model_types[1]});
  else
    v.require_model_type(s.name, {s.model_types[0]});
  v.read_int("depth", c.depth);
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_heads", c.num_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("out_hidden_size", c.out_hidden_size);
  v.read_int("patch_size", c.patch_size);
  v.read_int("temporal_patch_size", c.temporal_patch_size);
  v.read_int("spatial_merge_size", c.spatial_merge_size);
  v.read_int("in_chans", c.in_channels);  // Qwen2.5-VL's released checkpoints' spelling
  v.read_int("in_channels", c.in_channels);
  if (s.attention == Attention::Windowed) {
    v.read_int("window_size", c.window_size);
    read_int_list(v, "fullatt_block_indexes", c.fullatt_block_indexes);
  }
  if (s.pos_embed == PosEmbed::Interpolated)
    v.read_int("num_position_embeddings", c.num_position_embeddings);
  if (s.outputs == Outputs::Deepstack)
    read_int_list(v, "deepstack_visual_indexes", c.deepstack_visual_indexes);
  if (s.pos_embed == PosEmbed::Bicubic) {
    if (v.find("image_size")) {
      int64_t image_size = 0;
      v.read_int("image_size", image_size);
      c.num_position_embeddings = position_grid_entries(s, image_size, c.patch_size);
    }
  }
  if (s.outputs == Outputs::Downsample) {
    if (const encoder_kit::Json* j = v.find("attention_bias"))
      c.attention_bias = j->as_bool(v.where() + "attention_bias");
    if (const encoder_kit::Json* j = v.find("rms_norm_eps")) {
      const double eps = j->as_double(v.where() + "rms_norm_eps");
      if (!(eps > 0.0 && eps < 1.0))
        fail(EG_ERR_INVALID_ARGUMENT,
             v.where() + "rms_norm_eps is " + std::to_string(eps) + "; it must be in (0, 1)");
      c.norm_eps = static_cast<float>(eps);
    }
  }
  if (const encoder_kit::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string("vision_config.hidden_act");
    if (act != s.hidden_act)
      fail(EG_ERR_INVALID_ARGUMENT, v.where() + "hidden_act is '" + act + "'; the " + s.title +
                                        " tower this plugin implements uses '" + s.hidden_act +
                                        "'");
  }
}

// The folder's preprocessor_config.json (image bounds become the defaults)
// and, for VideoPixels::AllFrames, video_preprocessor_config.json (the video
// bounds); both must agree with the tower's sizes (checked after validate()).
void read_processor_configs(const encoder_kit::CheckpointFolder& folder, Options& o) {
  const Spec& s = o.spec();
  if (!folder.preprocessor.empty()) {
    const encoder_kit::PreprocessorJson j(folder.preprocessor, s.name);
    // Older files say min_pixels/max_pixels; newer ones size.shortest_edge/longest_edge.
    j.read_int("size", o.min_pixels, "shortest_edge");
    j.read_int("size", o.max_pixels, "longest_edge");
    j.read_int("min_pixels", o.min_pixels);
    j.read_int("max_pixels", o.max_pixels);
    check_processor_agrees(j, o.model);
  }
  // Qwen3VLVideoProcessor's size bounds all frames of a video together.
  if (s.video_pixels == VideoPixels::AllFrames && !folder.video_preprocessor.empty()) {
    const encoder_kit::PreprocessorJson j(folder.video_preprocessor, s.name);
    j.read_int("size", o.video_min_pixels, "shortest_edge");
    j.read_int("size", o.video_max_pixels, "longest_edge");
    check_processor_agrees(j, o.model);
  }
}

// A key naming one of the enum E's values: `names` in the enum's order, the
// first the default.
template <class E>
E choice(sdk::Config& r, const char* key, const std::vector<std::string>& names) {
  const std::string v = r.get_choice(key, names.front(), names);
  return static_cast<E>(std::find(names.begin(), names.end(), v) - names.begin());
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

int64_t VisionConfig::mlp_width() const {
  return spec->mlp_out_width ? out_hidden_size : intermediate_size;
}

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
  const encoder_kit::SizeChecks check{who};
  check.range("depth", depth, 1, 1024);
  check.range("hidden_size", hidden_size, 1, 65536);
  check.range("num_heads", num_heads, 1, 1024);
  check.range("intermediate_size", intermediate_size, 1, 262144);
  check.range("out_hidden_size", out_hidden_size, 1, 65536);
  check.range("patch_size", patch_size, 1, 512);
  check.range("temporal_patch_size", temporal_patch_size, 1, 16);
  check.range("spatial_merge_size", spatial_merge_size, 1, 16);
  if (s.attention == Attention::Windowed) check.range("window_size", window_size, 1, 65536);
  if (s.pos_embed != PosEmbed::None)
    check.range("num_position_embeddings", num_position_embeddings, 1, int64_t{1} << 20);
  check.multiple("hidden_size", hidden_size, "num_heads", num_heads);
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
  if (s.pos_embed != PosEmbed::None && pos_grid() * pos_grid() != num_position_embeddings)
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

Options parse_options(const Spec& s, sdk::Config& r, const eg_create_params& p) {
  Options o(s);
  VisionConfig& m = o.model;
  // A checkpoint folder as plugin.weights brings its config.json (unless
  // config_json names another) and its processors' configs.
  const encoder_kit::CheckpointFolder folder = encoder_kit::checkpoint_folder(p.weights);
  // The sizes the released checkpoints differ in (the others are the same in all).
  if (s.attention == Attention::Windowed)
    encoder_kit::require_folder_config(folder, r,
                                       {"depth", "hidden_size", "num_heads", "intermediate_size",
                                        "out_hidden_size", "fullatt_block_indexes"});
  else if (s.outputs == Outputs::Deepstack)
    encoder_kit::require_folder_config(
        folder, r,
        {"depth", "hidden_size", "num_heads", "intermediate_size", "out_hidden_size",
         "num_position_embeddings", "deepstack_visual_indexes"});
  else
    encoder_kit::require_folder_config(folder, r,
                                       {"depth", "hidden_size", "num_heads", "intermediate_size",
                                        "out_hidden_size", "image_size", "attention_bias"});
  const auto named = r.get_optional<std::string>("config_json");
  const bool folder_config = !named && !folder.config.empty();
  o.config_path = named ? *named : folder.config;
  if (named || folder_config) read_config_json(o.config_path, m);
  read_size_keys(encoder_kit::CheckpointKeys(r, folder_config ? folder.config : std::string()), s,
                 m);
  if (s.outputs == Outputs::Downsample) {
    // A folder's config.json says it already; the key is for bare safetensors.
    const bool bias = r.get<bool>("attention_bias", m.attention_bias);
    if (folder_config && bias != m.attention_bias)
      fail(EG_ERR_INVALID_ARGUMENT,
           std::string(s.name) + ": attention_bias = " + (bias ? "true" : "false") +
               " contradicts " + folder.config + " beside the weights; drop the key");
    m.attention_bias = bias;
  }
  m.validate();
  read_processor_configs(folder, o);

  o.dtype = encoder_kit::read_compute_dtype(r, p.device);
  read_budget_keys(r, o);
  o.check_finite = encoder_kit::read_check_finite(r);
  encoder_kit::read_seed_and_tuning(r, o);
  // Only Qwen2.5-VL's CUDA forward has these kernel choices.
  if (s.mlp == Mlp::GatedSilu && s.attention == Attention::Windowed) {
    o.mlp_kernel = choice<MlpKernel>(r, "mlp_kernel", {"auto", "fused", "fused_norm", "cublaslt"});
    o.qkv_kernel = choice<QkvKernel>(r, "qkv_kernel", {"auto", "fused_norm", "cublaslt"});
  }
  // Qwen2.5-VL's and Qwen3-VL's CUDA forwards run their blocks' products in FP8.
  if (s.outputs != Outputs::Downsample) {
    o.precision = encoder_kit::read_precision(r, p.device);
  }
  // Before any weight is read: a misspelt key is named first.
  r.reject_unknown();
  return o;
}

Options parse_options(const Spec& s, const eg_create_params* p) {
  sdk::Config config(p->config, p->num_config, s.name);
  return parse_options(s, config, *p);
}

}  // namespace qwen_vl
