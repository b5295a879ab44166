#include "llava_config.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/config_source.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>
#include <encoder_kit/model_config_json.hpp>
#include <encoder_kit/preprocessor_rules.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace llava_onevision {
namespace {

using encoder_kit::fail;
using encoder_kit::Json;

constexpr const char* kWho = "llava_onevision";

// "anyres_max_<n>": the most grid tiles' worth of positions an image keeps.
int64_t max_patches_of(const std::string& v, const std::string& what) {
  const std::string head = "anyres_max_";
  int64_t n = 0;
  bool ok =
      v.size() > head.size() && v.compare(0, head.size(), head) == 0 && v.size() - head.size() <= 4;
  for (size_t i = head.size(); ok && i < v.size(); ++i) {
    ok = v[i] >= '0' && v[i] <= '9';
    n = n * 10 + (v[i] - '0');
  }
  if (!ok || n < 1)
    fail(EG_ERR_UNSUPPORTED, std::string(kWho) + ": " + what + " is '" + v +
                                 "'; this plugin implements \"anyres_max_<n>\" (released: "
                                 "\"anyres_max_9\")");
  return n;
}

// A list of [height, width] pairs (image_grid_pinpoints).
std::vector<Resolution> pinpoints_of(const Json& j, const std::string& what) {
  std::vector<Resolution> out;
  for (const Json& e : j.as_array(what)) {
    const auto& pair = e.as_array(what);
    if (pair.size() != 2)
      fail(EG_ERR_INVALID_ARGUMENT,
           std::string(kWho) + ": " + what + " entries must be [height, width] pairs");
    out.push_back({pair[0].as_int(what), pair[1].as_int(what)});
  }
  return out;
}

// The vision_config of a LlavaOnevisionConfig, and its top-level keys the encoder uses.
void read_config_json(const std::string& path, ModelConfig& c, std::vector<Resolution>& pins) {
  const encoder_kit::VisionConfigJson v(path, kWho);
  v.require_model_type(kWho, {"llava_onevision"});
  const std::string& where = v.where();
  siglip::VisionConfig& t = c.vision;
  v.read_int("hidden_size", t.hidden_size);
  v.read_int("num_hidden_layers", t.num_hidden_layers);
  v.read_int("num_attention_heads", t.num_attention_heads);
  v.read_int("intermediate_size", t.intermediate_size);
  v.read_int("image_size", t.image_size);
  v.read_int("patch_size", t.patch_size);
  v.read_int("num_channels", t.num_channels);
  if (const Json* j = v.find("layer_norm_eps"))
    t.layer_norm_eps = static_cast<float>(j->as_double(where + "layer_norm_eps"));
  if (const Json* j = v.find("hidden_act");
      j && j->as_string(where + "hidden_act") != "gelu_pytorch_tanh")
    fail(EG_ERR_UNSUPPORTED, std::string(kWho) + ": " + where + "hidden_act is '" +
                                 j->as_string(where + "hidden_act") +
                                 "'; the SigLIP tower implements 'gelu_pytorch_tanh'");

  const encoder_kit::ModelConfigJson top(path, kWho);
  const std::string& at = top.at();
  top.read_feature_layer(c.feature_layer);
  top.require_string("vision_feature_select_strategy", "full",
                     " (SigLIP has no CLS token; \"default\" would drop a patch)");
  top.require_string("projector_hidden_act", "gelu");
  if (const Json* j = top.find("multimodal_projector_bias"))
    c.projector_bias = j->as_bool(at + "multimodal_projector_bias");
  if (const Json* j = top.find("vision_aspect_ratio"))
    c.max_num_patches = max_patches_of(j->as_string(at + "vision_aspect_ratio"),
                                       "config_json '" + path + "' vision_aspect_ratio");
  if (const Json* j = top.find("image_grid_pinpoints"))
    pins = pinpoints_of(*j, "config_json '" + path + "' image_grid_pinpoints");
  top.read_text_hidden_size(c.text_hidden_size);
}

// preprocessor_config.json: the tile size must be the tower's image_size.
void read_preprocessor(const std::string& path, const ModelConfig& m, Processor& p,
                       std::vector<Resolution>& pins) {
  const encoder_kit::PreprocessorJson j(path, kWho);
  const std::string& where = j.where();
  encoder_kit::require_tile_size(j, kWho, m.vision.image_size);
  // A file without them means LlavaOnevisionImageProcessor's defaults (CLIP's).
  p.mean = encoder_kit::kClipMean;
  p.std = encoder_kit::kClipStd;
  encoder_kit::read_rescale_and_normalise(j, kWho, p.mean, p.std);
  p.bilinear = encoder_kit::read_bilinear(j, kWho);
  if (const Json* v = j.find("image_grid_pinpoints")) {
    const std::vector<Resolution> file = pinpoints_of(*v, where + "image_grid_pinpoints");
    // The processor tiles with its list, the model unpads with config.json's:
    // two lists would disagree on an image's grid.
    auto same = [](const std::vector<Resolution>& a, const std::vector<Resolution>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                        [](auto x, auto y) { return x.height == y.height && x.width == y.width; });
    };
    if (!pins.empty() && !same(pins, file))
      fail(EG_ERR_INVALID_ARGUMENT,
           std::string(kWho) + ": " + where +
               "image_grid_pinpoints differs from config.json's; the processor and the model "
               "must use one list");
    pins = file;
  }
}

}  // namespace

std::vector<Resolution> default_pinpoints(int64_t tile) {
  std::vector<Resolution> out;
  for (int64_t h = 1; h <= 6; ++h)
    for (int64_t w = 1; w <= 6; ++w) out.push_back({h * tile, w * tile});
  return out;
}

void ModelConfig::validate() const {
  vision.validate();
  const encoder_kit::SizeChecks check{kWho};
  check.range("text_hidden_size", text_hidden_size, 1, 65536);
  check.range("vision_aspect_ratio's anyres_max", max_num_patches, 1, 1024);
  encoder_kit::require_feature_layer(kWho, feature_layer, vision.num_hidden_layers);
}

int64_t Options::max_image_tiles() const {
  const int64_t tile = model.vision.image_size;
  int64_t most = 1;
  for (const Resolution& r : processor.pinpoints)
    most = std::max(most, (r.height / tile) * (r.width / tile));
  return most + 1;
}

siglip::Options Options::tower(const std::string& tower_prefix) const {
  siglip::Options t;
  static_cast<encoder_kit::RunOptions&>(t) = *this;
  t.model = model.vision;
  t.config_path = config_path;
  t.outputs = {siglip::Output::LastHiddenState};
  t.feature_layer = model.feature_layer;
  t.weight_prefix = tower_prefix;
  t.dtype = dtype;
  t.precision = precision;
  t.bilinear_resize = processor.bilinear;
  return t;
}

Options parse_options(encgraph::sdk::Config& r, const eg_create_params& p) {
  Options o;
  ModelConfig& m = o.model;
  const encoder_kit::ConfigSource src = encoder_kit::config_source(
      r, p.weights,
      {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "image_size",
       "patch_size", "text_hidden_size"});
  o.config_path = src.config_path;
  std::vector<Resolution> pins;
  if (src.has_config) read_config_json(o.config_path, m, pins);
  const encoder_kit::CheckpointKeys keys(r, src.folder_config);
  siglip::VisionConfig& t = m.vision;
  keys.dim("hidden_size", t.hidden_size);
  keys.dim("num_hidden_layers", t.num_hidden_layers);
  keys.dim("num_attention_heads", t.num_attention_heads);
  keys.dim("intermediate_size", t.intermediate_size);
  keys.dim("image_size", t.image_size);
  keys.dim("patch_size", t.patch_size);
  keys.dim("text_hidden_size", m.text_hidden_size);
  t.layer_norm_eps = r.get<float>("layer_norm_eps", t.layer_norm_eps);
  m.feature_layer = r.get<int64_t>("vision_feature_layer", m.feature_layer);
  m.projector_bias = r.get<bool>("multimodal_projector_bias", m.projector_bias);
  if (auto v = r.get_optional<std::string>("vision_aspect_ratio"))
    m.max_num_patches = max_patches_of(*v, "vision_aspect_ratio");
  m.validate();

  Processor& pr = o.processor;
  if (!src.folder.preprocessor.empty()) read_preprocessor(src.folder.preprocessor, m, pr, pins);
  if (auto list = r.get_optional<std::vector<int64_t>>("image_grid_pinpoints")) {
    if (list->empty() || list->size() % 2 != 0)
      fail(EG_ERR_INVALID_ARGUMENT, std::string(kWho) +
                                        ": image_grid_pinpoints must be a flat list of height, "
                                        "width pairs, e.g. [384, 384, 384, 768]");
    pins.clear();
    for (size_t i = 0; i < list->size(); i += 2) pins.push_back({(*list)[i], (*list)[i + 1]});
  }
  pr.pinpoints = pins.empty() ? default_pinpoints(t.image_size) : pins;
  for (const Resolution& res : pr.pinpoints)
    if (res.height < t.image_size || res.width < t.image_size || res.height % t.image_size != 0 ||
        res.width % t.image_size != 0 || res.height > 64 * t.image_size ||
        res.width > 64 * t.image_size)
      fail(EG_ERR_INVALID_ARGUMENT,
           std::string(kWho) + ": image_grid_pinpoints entry [" + std::to_string(res.height) +
               ", " + std::to_string(res.width) + "] is not a multiple of the tile size " +
               std::to_string(t.image_size) + " (at most 64 tiles a side)");
  pr.bilinear = r.get_choice("resample", pr.bilinear ? "bilinear" : "bicubic",
                             {"bicubic", "bilinear"}) == "bilinear";

  o.weight_prefix = r.get<std::string>("weight_prefix", o.weight_prefix);
  o.dtype = encoder_kit::read_compute_dtype(r, p.device);
  o.precision = encoder_kit::read_precision(r, p.device);
  o.max_budget_tiles = r.get<int64_t>("max_budget_tiles", o.max_budget_tiles, {1, 65536});
  // A video is one batch: its frames default to what the largest graph holds.
  o.max_frames_per_video = r.get<int32_t>(
      "max_frames_per_video",
      static_cast<int32_t>(std::min<int64_t>(o.max_frames_per_video, o.max_budget_tiles)),
      {1, 4096});
  const int64_t need = std::max<int64_t>(o.max_image_tiles(), o.max_frames_per_video);
  if (o.max_budget_tiles < need)
    fail(EG_ERR_INVALID_ARGUMENT,
         std::string(kWho) + ": max_budget_tiles " + std::to_string(o.max_budget_tiles) +
             " is below the " + std::to_string(need) +
             " tiles one item can get (the largest pinpoint's grid plus the base image, or "
             "max_frames_per_video frames): raise max_budget_tiles");
  if (o.max_budget_tiles * m.max_out_rows_per_tile() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT, std::string(kWho) + ": max_budget_tiles " +
                                      std::to_string(o.max_budget_tiles) +
                                      " overflows the int32 row offsets: lower it");
  o.check_finite = encoder_kit::read_check_finite(r);
  encoder_kit::read_seed_and_tuning(r, o);
  r.reject_unknown();
  return o;
}

Options parse_options(const eg_create_params* p) {
  encgraph::sdk::Config config(p->config, p->num_config, kWho);
  return parse_options(config, *p);
}

}  // namespace llava_onevision
