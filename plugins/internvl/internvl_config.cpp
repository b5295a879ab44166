#include "internvl_config.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/config_source.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>
#include <encoder_kit/model_config_json.hpp>
#include <encoder_kit/preprocessor_rules.hpp>

#include <cmath>
#include <limits>
#include <utility>

namespace internvl {
namespace {

using encoder_kit::fail;
using encoder_kit::Json;

// image_size / patch_size: an integer or a square [h, w] pair.
void read_side(const encoder_kit::VisionConfigJson& v, const char* key, int64_t& dst) {
  const Json* j = v.find(key);
  if (!j) return;
  const std::string what = v.where() + key;
  if (!j->is_array()) {
    dst = j->as_int(what);
    return;
  }
  const auto& a = j->as_array(what);
  if (a.size() != 2 || a[0].as_int(what) != a[1].as_int(what))
    fail(EG_ERR_UNSUPPORTED, "internvl: " + what + " must be one integer or a square [n, n] pair");
  dst = a[0].as_int(what);
}

// 1 / downsample_ratio: how many patches per side one output token merges.
int64_t shuffle_of(double r, const std::string& what) {
  const double inv = r > 0 ? 1.0 / r : 0.0;
  if (!(r > 0) || inv > 16 || std::fabs(inv - std::round(inv)) > 1e-9)
    fail(EG_ERR_UNSUPPORTED, "internvl: " + what + " " + std::to_string(r) +
                                 " is not 1/n for a whole n up to 16 (InternVL uses 0.5)");
  return static_cast<int64_t>(std::round(inv));
}

// The vision_config of an InternVLConfig, and its top-level keys the encoder uses.
void read_config_json(const std::string& path, ModelConfig& c) {
  const encoder_kit::VisionConfigJson v(path, "internvl");
  v.require_model_type("internvl", {"internvl", "internvl_vision"});
  const std::string& where = v.where();
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_hidden_layers", c.num_hidden_layers);
  v.read_int("num_attention_heads", c.num_attention_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("num_channels", c.num_channels);
  read_side(v, "image_size", c.image_size);
  read_side(v, "patch_size", c.patch_size);
  if (const Json* j = v.find("layer_norm_eps"))
    c.layer_norm_eps = static_cast<float>(j->as_double(where + "layer_norm_eps"));
  if (const Json* j = v.find("hidden_act"); j && j->as_string(where + "hidden_act") != "gelu")
    fail(EG_ERR_UNSUPPORTED, "internvl: " + where + "hidden_act is '" +
                                 j->as_string(where + "hidden_act") +
                                 "'; this plugin implements InternViT's 'gelu'");
  if (const Json* j = v.find("norm_type")) {
    const std::string n = j->as_string(where + "norm_type");
    if (n != "layer_norm" && n != "rms_norm")
      fail(EG_ERR_UNSUPPORTED,
           "internvl: " + where + "norm_type is '" + n + "'; use 'layer_norm' or 'rms_norm'");
    c.rms_norm = n == "rms_norm";
  }
  for (auto [key, dst] : {std::pair{"attention_bias", &c.attention_bias},
                          {"use_qk_norm", &c.use_qk_norm},
                          {"use_mean_pooling", &c.use_mean_pooling}})
    if (const Json* j = v.find(key)) *dst = j->as_bool(where + key);
  if (const Json* j = v.find("use_absolute_position_embeddings");
      j && !j->as_bool(where + "use_absolute_position_embeddings"))
    fail(EG_ERR_UNSUPPORTED, "internvl: " + where +
                                 "use_absolute_position_embeddings is false; InternViT "
                                 "checkpoints have them (this plugin requires them)");

  // The top level: the projector and the feature selection.
  const encoder_kit::ModelConfigJson top(path, "internvl");
  const std::string& at = top.at();
  if (const Json* j = top.find("downsample_ratio"))
    c.shuffle = shuffle_of(j->as_double(at + "downsample_ratio"),
                           "config_json '" + path + "' downsample_ratio");
  top.read_feature_layer(c.feature_layer);
  top.require_string("vision_feature_select_strategy", "default",
                     " (the CLS token dropped before the pixel shuffle)");
  top.require_string("projector_hidden_act", "gelu");
  top.read_text_hidden_size(c.text_hidden_size);
}

// preprocessor_config.json: the tile size must be the tower's image_size.
void read_preprocessor(const std::string& path, const ModelConfig& m, Processor& p) {
  const encoder_kit::PreprocessorJson j(path, "internvl");
  encoder_kit::require_tile_size(j, "internvl", m.image_size);
  // crop_to_patches is not read: InternVLProcessor passes crop_to_patches = true
  // whatever the file says (GotOcr2's saved default is false).
  j.read_int("min_patches", p.min_patches);
  j.read_int("max_patches", p.max_patches);
  // A file without them means GotOcr2ImageProcessor's defaults, OpenAI CLIP's.
  p.mean = encoder_kit::kClipMean;
  p.std = encoder_kit::kClipStd;
  encoder_kit::read_rescale_and_normalise(j, "internvl", p.mean, p.std);
  p.bilinear = encoder_kit::read_bilinear(j, "internvl");
}

}  // namespace

void ModelConfig::validate() const {
  const encoder_kit::SizeChecks check{"internvl"};
  check.vit(hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, image_size,
            patch_size);
  check.range("text_hidden_size", text_hidden_size, 1, 65536);
  check.multiple("hidden_size", hidden_size, "num_attention_heads", num_attention_heads);
  check.multiple("image_size", image_size, "patch_size", patch_size);
  if (grid() % shuffle != 0)
    fail(
        EG_ERR_INVALID_ARGUMENT,
        "internvl: the pixel shuffle merges " + std::to_string(shuffle) + "x" +
            std::to_string(shuffle) + " patches, but a tile has " + std::to_string(grid()) +
            " patches per side (image_size / patch_size must be a multiple of 1/downsample_ratio)");
  if (num_channels != 3)
    fail(EG_ERR_INVALID_ARGUMENT,
         "internvl: num_channels must be 3 (RGB), got " + std::to_string(num_channels));
  if (!(layer_norm_eps > 0.0f) || !std::isfinite(layer_norm_eps))
    fail(EG_ERR_INVALID_ARGUMENT, "internvl: layer_norm_eps must be a positive finite number");
  encoder_kit::require_feature_layer("internvl", feature_layer, num_hidden_layers);
}

Options parse_options(encgraph::sdk::Config& r, const eg_create_params& p) {
  Options o;
  ModelConfig& m = o.model;
  const encoder_kit::ConfigSource src = encoder_kit::config_source(
      r, p.weights,
      {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "image_size",
       "patch_size", "text_hidden_size"});
  o.config_path = src.config_path;
  if (src.has_config) read_config_json(o.config_path, m);
  const encoder_kit::CheckpointKeys keys(r, src.folder_config);
  keys.dim("hidden_size", m.hidden_size);
  keys.dim("num_hidden_layers", m.num_hidden_layers);
  keys.dim("num_attention_heads", m.num_attention_heads);
  keys.dim("intermediate_size", m.intermediate_size);
  keys.dim("image_size", m.image_size);
  keys.dim("patch_size", m.patch_size);
  keys.dim("text_hidden_size", m.text_hidden_size);
  m.layer_norm_eps = r.get<float>("layer_norm_eps", m.layer_norm_eps);
  m.rms_norm = r.get_choice("norm_type", m.rms_norm ? "rms_norm" : "layer_norm",
                            {"layer_norm", "rms_norm"}) == "rms_norm";
  m.use_qk_norm = r.get<bool>("use_qk_norm", m.use_qk_norm);
  m.attention_bias = r.get<bool>("attention_bias", m.attention_bias);
  m.use_mean_pooling = r.get<bool>("use_mean_pooling", m.use_mean_pooling);
  if (auto ratio = r.get_optional<double>("downsample_ratio"))
    m.shuffle = shuffle_of(*ratio, "downsample_ratio");
  m.feature_layer = r.get<int64_t>("vision_feature_layer", m.feature_layer);
  m.validate();

  Processor& pr = o.processor;
  if (!src.folder.preprocessor.empty()) read_preprocessor(src.folder.preprocessor, m, pr);
  pr.crop_to_patches = r.get<bool>("crop_to_patches", pr.crop_to_patches);
  pr.min_patches = r.get<int64_t>("min_patches", pr.min_patches, {1, 256});
  pr.max_patches = r.get<int64_t>("max_patches", pr.max_patches, {1, 256});
  if (pr.min_patches > pr.max_patches)
    fail(EG_ERR_INVALID_ARGUMENT, "internvl: min_patches " + std::to_string(pr.min_patches) +
                                      " is above max_patches " + std::to_string(pr.max_patches));
  pr.bilinear = r.get_choice("resample", pr.bilinear ? "bilinear" : "bicubic",
                             {"bicubic", "bilinear"}) == "bilinear";

  o.weight_prefix = r.get<std::string>("weight_prefix", o.weight_prefix);
  o.dtype = encoder_kit::read_compute_dtype(r, p.device);
  o.precision = encoder_kit::read_precision(r, p.device);
  o.max_budget_tiles = r.get<int64_t>("max_budget_tiles", o.max_budget_tiles, {1, 65536});
  if (o.max_budget_tiles < pr.max_tiles())
    fail(EG_ERR_INVALID_ARGUMENT,
         "internvl: max_budget_tiles " + std::to_string(o.max_budget_tiles) + " is below the " +
             std::to_string(pr.max_tiles()) +
             " tiles one image can get (max_patches + the thumbnail): raise max_budget_tiles "
             "or lower max_patches");
  if (o.max_budget_tiles * m.seq_per_tile() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         "internvl: max_budget_tiles " + std::to_string(o.max_budget_tiles) + " x " +
             std::to_string(m.seq_per_tile()) +
             " tokens per tile overflow the int32 sequence offsets: lower max_budget_tiles");
  o.check_finite = encoder_kit::read_check_finite(r);
  encoder_kit::read_seed_and_tuning(r, o);
  r.reject_unknown();
  return o;
}

Options parse_options(const eg_create_params* p) {
  encgraph::sdk::Config config(p->config, p->num_config, "internvl");
  return parse_options(config, *p);
}

}  // namespace internvl
