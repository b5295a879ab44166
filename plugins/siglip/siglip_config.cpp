#include "siglip_config.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/config_source.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/json.hpp>
#include <encoder_kit/preprocessor_rules.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace siglip {
namespace {

using encoder_kit::fail;

// The vision_config of a SiglipConfig / VLM config.json, or a bare
// SiglipVisionConfig. Returns whether the file says the tower has its head.
bool read_config_json(const std::string& path, VisionConfig& c) {
  const encoder_kit::VisionConfigJson v(path, "siglip");
  v.require_model_type("siglip", {"siglip", "siglip_vision_model"});
  const std::string& where = v.where();
  v.read_int("hidden_size", c.hidden_size);
  v.read_int("num_hidden_layers", c.num_hidden_layers);
  v.read_int("num_attention_heads", c.num_attention_heads);
  v.read_int("intermediate_size", c.intermediate_size);
  v.read_int("image_size", c.image_size);
  v.read_int("patch_size", c.patch_size);
  v.read_int("num_channels", c.num_channels);
  if (const encoder_kit::Json* j = v.find("layer_norm_eps"))
    c.layer_norm_eps = static_cast<float>(j->as_double(where + "layer_norm_eps"));
  if (const encoder_kit::Json* j = v.find("hidden_act")) {
    const std::string act = j->as_string(where + "hidden_act");
    if (act != "gelu_pytorch_tanh")
      fail(EG_ERR_INVALID_ARGUMENT, where + "hidden_act is '" + act +
                                        "'; this plugin implements SigLIP's 'gelu_pytorch_tanh'");
  }
  const encoder_kit::Json* head = v.find("vision_use_head");
  return !head || head->as_bool(where + "vision_use_head");
}

// The folder's preprocessor_config.json: its size must be the tower's
// image_size and its normalisation the plugin's; returns its resampling as
// the `resample` key spells it (the key overrides it).
std::string read_preprocessor(const std::string& path, const VisionConfig& m) {
  const encoder_kit::PreprocessorJson j(path, "siglip");
  encoder_kit::require_tile_size(j, "siglip", m.image_size);
  j.require_floats("siglip", "image_mean", {0.5, 0.5, 0.5});
  j.require_floats("siglip", "image_std", {0.5, 0.5, 0.5});
  return encoder_kit::read_bilinear(j, "siglip") ? "bilinear" : "bicubic";
}

Output parse_output(const std::string& key, const std::string& text) {
  if (text == "last_hidden_state") return Output::LastHiddenState;
  if (text == "pooled" || text == "pooler_output") return Output::Pooled;
  fail(EG_ERR_INVALID_ARGUMENT,
       "siglip: " + key + " '" + text + "' is not \"last_hidden_state\" or \"pooled\"");
}

// `output = "name"` (one output) or `outputs = ["name", ...]` (several, the
// first one primary), not both.
std::vector<Output> read_outputs(encgraph::sdk::Config& r) {
  if (r.has("output") && r.has("outputs"))
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: both `output` and `outputs` are set; keep `outputs` (a list) and remove "
         "`output`");
  r.known("outputs");
  if (!r.has("outputs"))
    return {parse_output("output", r.get<std::string>("output", "last_hidden_state"))};
  r.known("output");
  const auto names = r.get<std::vector<std::string>>("outputs", {});
  if (names.empty())
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: outputs is empty; list at least one of \"last_hidden_state\", \"pooled\"");
  std::vector<Output> out;
  for (const std::string& n : names) {
    const Output o = parse_output("outputs entry", n);
    if (std::find(out.begin(), out.end(), o) != out.end())
      fail(EG_ERR_INVALID_ARGUMENT, std::string("siglip: outputs lists \"") + output_name(o) +
                                        "\" twice; list each output once");
    out.push_back(o);
  }
  return out;
}

}  // namespace

const char* output_name(Output output) {
  return output == Output::Pooled ? "pooled" : "last_hidden_state";
}

bool Options::has(Output output) const {
  return std::find(outputs.begin(), outputs.end(), output) != outputs.end();
}

void VisionConfig::validate() const {
  // Bounds far above every released tower that keep each size product the
  // plugin computes (rows x patch values, weights, workspaces) inside 64 bits.
  const encoder_kit::SizeChecks check{"siglip"};
  check.vit(hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, image_size,
            patch_size);
  check.multiple("hidden_size", hidden_size, "num_attention_heads", num_attention_heads);
  // image_size need not be a multiple of patch_size: the Conv2d ("valid"
  // padding) ignores the last image_size % patch_size rows and columns, as
  // so400m-patch14-384 does (27 x 14 = 378 of 384).
  if (image_size < patch_size)
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: image_size " + std::to_string(image_size) +
                                      " is smaller than patch_size " + std::to_string(patch_size) +
                                      ": no patch fits");
  if (num_channels != 3)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: num_channels must be 3 (RGB), got " + std::to_string(num_channels));
  if (!(layer_norm_eps > 0.0f) || !std::isfinite(layer_norm_eps))
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: layer_norm_eps must be a positive finite number, got " +
                                      std::to_string(layer_norm_eps));
}

int64_t Options::layers_to_run() const {
  const int64_t n = model.num_hidden_layers;
  if (!feature_layer) return n;
  return *feature_layer >= 0 ? *feature_layer : n + 1 + *feature_layer;
}

Options parse_options(encgraph::sdk::Config& r, const eg_create_params& p) {
  Options o;
  VisionConfig& m = o.model;
  bool has_head = true;
  // A checkpoint folder as plugin.weights brings its config.json (unless
  // config_json names another) and preprocessor_config.json.
  const encoder_kit::ConfigSource src =
      encoder_kit::config_source(r, p.weights,
                                 {"hidden_size", "num_hidden_layers", "num_attention_heads",
                                  "intermediate_size", "image_size", "patch_size"});
  o.config_path = src.config_path;
  if (src.has_config) has_head = read_config_json(o.config_path, m);
  // Keys override config_json; a key that contradicts the folder's own
  // config.json is an error (the weights beside it have its sizes).
  // validate() bounds the sizes wherever they came from.
  const encoder_kit::CheckpointKeys keys(r, src.folder_config);
  keys.dim("hidden_size", m.hidden_size);
  keys.dim("num_hidden_layers", m.num_hidden_layers);
  keys.dim("num_attention_heads", m.num_attention_heads);
  keys.dim("intermediate_size", m.intermediate_size);
  keys.dim("image_size", m.image_size);
  keys.dim("patch_size", m.patch_size);
  keys.dim("num_channels", m.num_channels);
  m.layer_norm_eps = r.get<float>("layer_norm_eps", m.layer_norm_eps);
  m.validate();

  o.outputs = read_outputs(r);
  // An integer, or "none" (the default: the last layer through post_layernorm).
  if (auto fl = r.get_optional<std::string>("feature_layer"); fl && *fl != "none") {
    const int64_t n = m.num_hidden_layers;
    const int64_t v = r.get<int64_t>("feature_layer", 0);
    if (v < -(n + 1) || v > n)
      fail(EG_ERR_INVALID_ARGUMENT,
           "siglip: feature_layer " + std::to_string(v) + " is outside [-" + std::to_string(n + 1) +
               ", " + std::to_string(n) +
               "] (hidden_states has the embeddings plus one entry per layer)");
    o.feature_layer = v;
  }
  if (o.needs_head() && o.feature_layer)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: output = \"pooled\" pools the post-layernorm output of every layer; "
         "it cannot be combined with feature_layer (remove one of them)");
  if (o.needs_head() && !has_head)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: output = \"pooled\" needs the pooling head, but config_json says "
         "vision_use_head = false");

  o.weight_prefix = r.get<std::string>("weight_prefix", o.weight_prefix);
  o.dtype = encoder_kit::read_compute_dtype(r, p.device);
  o.precision = encoder_kit::read_precision(r, p.device);

  o.max_budget_images = r.get<int64_t>("max_budget_images", o.max_budget_images, {1, 65536});
  // Patch rows of the largest graph live in int32 sequence offsets.
  if (o.max_budget_images * m.tokens_per_image() > std::numeric_limits<int32_t>::max())
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: max_budget_images " + std::to_string(o.max_budget_images) + " x " +
             std::to_string(m.tokens_per_image()) +
             " tokens per image overflow the int32 sequence offsets: lower max_budget_images "
             "(or image_size)");
  o.check_finite = encoder_kit::read_check_finite(r);
  const std::string resample = r.get_choice(
      "resample",
      src.folder.preprocessor.empty() ? "bicubic" : read_preprocessor(src.folder.preprocessor, m),
      {"bicubic", "bilinear"});
  o.bilinear_resize = resample == "bilinear";
  encoder_kit::read_seed_and_tuning(r, o);
  // Before any weight is read: a misspelt key is named first.
  r.reject_unknown();
  return o;
}

Options parse_options(const eg_create_params* p) {
  encgraph::sdk::Config config(p->config, p->num_config, "siglip");
  return parse_options(config, *p);
}

}  // namespace siglip
