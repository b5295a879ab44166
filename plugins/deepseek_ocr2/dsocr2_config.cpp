#include "dsocr2_config.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/config_source.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>
#include <encoder_kit/json.hpp>

#include <algorithm>

namespace dsocr2 {
namespace {

using encoder_kit::fail;
using encoder_kit::Json;

constexpr int64_t kMaxBudget = int64_t{1} << 22;

void read_int(const Json& obj, const char* key, const std::string& where, int64_t& dst) {
  if (const Json* j = obj.find(key)) dst = j->as_int(where + key);
}

void read_list(const Json& obj, const char* key, const std::string& where,
               std::vector<int64_t>& dst) {
  if (const Json* j = obj.find(key)) {
    dst.clear();
    for (const Json& e : j->as_array(where + key)) dst.push_back(e.as_int(where + key + " entry"));
  }
}

// Both layouts of config.json: transformers' (model_type deepseek_ocr2:
// vision_config.sam_config / encoder_config, text_config) and DeepSeek's
// release (model_type deepseek_vl_v2: vision_config.width.sam_vit_b and
// ["qwen2-0-5b"], projector_config; the rest is fixed in its code).
void read_config_json(const std::string& path, ModelConfig& c) {
  const std::string where = "deepseek_ocr2: config_json '" + path + "' ";
  const Json doc = Json::parse(
      encoder_kit::read_text_input(path, "config_json", "a Hugging Face config.json"), where);
  if (!doc.is_object()) fail(EG_ERR_INVALID_ARGUMENT, where + "is not a JSON object");
  std::string type;
  if (const Json* t = doc.find("model_type")) type = t->as_string(where + "model_type");
  const Json* vision = doc.find("vision_config");
  if (type != "deepseek_ocr2" && type != "deepseek_vl_v2")
    fail(EG_ERR_INVALID_ARGUMENT, where + "has model_type '" + type +
                                      "'; this plugin reads DeepSeek-OCR-2's config.json "
                                      "(model_type deepseek_ocr2 or deepseek_vl_v2)");
  if (!vision || !vision->is_object())
    fail(EG_ERR_INVALID_ARGUMENT, where + "has no vision_config object");
  if (type == "deepseek_ocr2") {
    if (const Json* s = vision->find("sam_config")) {
      const std::string w = where + "vision_config.sam_config.";
      read_int(*s, "hidden_size", w, c.sam_hidden_size);
      read_int(*s, "num_hidden_layers", w, c.sam_layers);
      read_int(*s, "num_attention_heads", w, c.sam_heads);
      read_int(*s, "image_size", w, c.sam_image_size);
      read_int(*s, "patch_size", w, c.patch_size);
      read_int(*s, "window_size", w, c.window_size);
      read_int(*s, "output_channels", w, c.neck_channels);
      read_list(*s, "global_attn_indexes", w, c.global_attn_indexes);
      read_list(*s, "downsample_channels", w, c.downsample_channels);
      c.sam_mlp_dim = 4 * c.sam_hidden_size;
      if (const Json* r = s->find("mlp_ratio"))
        c.sam_mlp_dim = static_cast<int64_t>(static_cast<double>(c.sam_hidden_size) *
                                             r->as_double(w + "mlp_ratio"));
      read_int(*s, "mlp_dim", w, c.sam_mlp_dim);
    }
    if (const Json* e = vision->find("encoder_config")) {
      const std::string w = where + "vision_config.encoder_config.";
      int64_t hidden = c.encoder_hidden();
      read_int(*e, "hidden_size", w, hidden);
      c.downsample_channels.back() = hidden;
      read_int(*e, "num_hidden_layers", w, c.encoder_layers);
      read_int(*e, "num_attention_heads", w, c.encoder_heads);
      read_int(*e, "num_key_value_heads", w, c.encoder_kv_heads);
      read_int(*e, "intermediate_size", w, c.encoder_intermediate_size);
      if (const Json* t = e->find("rope_theta")) c.rope_theta = t->as_double(w + "rope_theta");
      if (const Json* rp = e->find("rope_parameters"))
        if (const Json* t = rp->find("rope_theta"))
          c.rope_theta = t->as_double(w + "rope_parameters.rope_theta");
    }
    if (const Json* t = doc.find("text_config"))
      read_int(*t, "hidden_size", where + "text_config.", c.text_hidden_size);
  } else {
    if (const Json* wd = vision->find("width")) {
      if (const Json* s = wd->find("sam_vit_b")) {
        const std::string w = where + "vision_config.width.sam_vit_b.";
        read_int(*s, "width", w, c.sam_hidden_size);
        read_int(*s, "layers", w, c.sam_layers);
        read_int(*s, "heads", w, c.sam_heads);
        read_list(*s, "global_attn_indexes", w, c.global_attn_indexes);
        c.sam_mlp_dim = 4 * c.sam_hidden_size;
      }
      if (const Json* q = wd->find("qwen2-0-5b")) {
        int64_t dim = c.encoder_hidden();
        read_int(*q, "dim", where + "vision_config.width.qwen2-0-5b.", dim);
        c.downsample_channels.back() = dim;
      }
    }
    if (const Json* p = doc.find("projector_config"))
      read_int(*p, "n_embed", where + "projector_config.", c.text_hidden_size);
  }
}

}  // namespace

bool ModelConfig::is_global_layer(int64_t layer) const {
  return std::find(global_attn_indexes.begin(), global_attn_indexes.end(), layer) !=
         global_attn_indexes.end();
}

int64_t ModelConfig::view_tokens(int64_t side) const {
  const int64_t g = grid(side), half = (g + 1) / 2, quarter = (half + 1) / 2;
  return quarter * quarter;
}

void ModelConfig::validate() const {
  const encoder_kit::SizeChecks check{"deepseek_ocr2"};
  check.range("patch_size", patch_size, 1, 256);
  check.range("sam_image_size", sam_image_size, patch_size, 16384);
  check.range("sam_hidden_size", sam_hidden_size, 1, 16384);
  check.range("sam_layers", sam_layers, 1, 256);
  check.range("sam_heads", sam_heads, 1, 256);
  check.range("sam_mlp_dim", sam_mlp_dim, 1, 65536);
  check.range("window_size", window_size, 1, 1024);
  check.range("neck_channels", neck_channels, 1, 16384);
  if (downsample_channels.size() != 2)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: downsample_channels must list 2 sizes, got " +
                                      std::to_string(downsample_channels.size()));
  check.range("downsample_channels[0]", downsample_channels[0], 1, 16384);
  check.range("downsample_channels[1] (the encoder's hidden size)", downsample_channels[1], 1,
              16384);
  check.range("encoder_layers", encoder_layers, 1, 256);
  check.range("encoder_heads", encoder_heads, 1, 256);
  check.range("encoder_kv_heads", encoder_kv_heads, 1, encoder_heads);
  check.range("encoder_intermediate_size", encoder_intermediate_size, 1, 65536);
  check.range("text_hidden_size", text_hidden_size, 1, 65536);
  check.range("global_size", global_size, patch_size, 16384);
  check.range("tile_size", tile_size, patch_size, 16384);
  check.range("min_crops", min_crops, 1, 64);
  check.range("max_crops", max_crops, min_crops, 64);
  if (!(rope_theta > 0))
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: rope_theta must be positive");
  check.multiple("sam_hidden_size", sam_hidden_size, "sam_heads", sam_heads);
  check.multiple("encoder hidden size (downsample_channels[1])", encoder_hidden(), "encoder_heads",
                 encoder_heads);
  check.multiple("encoder_heads", encoder_heads, "encoder_kv_heads", encoder_kv_heads);
  check.multiple("encoder head_dim", encoder_head_dim(), "2 (rotate-half rotary):", 2);
  check.multiple("sam_image_size", sam_image_size, "patch_size", patch_size);
  check.multiple("global_size", global_size, "patch_size", patch_size);
  check.multiple("tile_size", tile_size, "patch_size", patch_size);
  for (int64_t l : global_attn_indexes)
    if (l < 0 || l >= sam_layers)
      fail(EG_ERR_INVALID_ARGUMENT,
           "deepseek_ocr2: global_attn_indexes entry " + std::to_string(l) +
               " is outside [0, sam_layers=" + std::to_string(sam_layers) + ")");
  if (global_tokens() == local_tokens())
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: global_size " + std::to_string(global_size) +
                                      " and tile_size " + std::to_string(tile_size) +
                                      " give the same query count; the two query banks "
                                      "(query_1024 / query_768) need different view sizes");
}

Options parse_options(encgraph::sdk::Config& r, const eg_create_params& p) {
  Options o;
  ModelConfig& m = o.model;
  // Every size config.json gives.
  const encoder_kit::ConfigSource src = encoder_kit::config_source(
      r, p.weights,
      {"patch_size", "sam_image_size", "sam_hidden_size", "sam_layers", "sam_heads", "sam_mlp_dim",
       "window_size", "global_attn_indexes", "neck_channels", "downsample_channels",
       "encoder_layers", "encoder_heads", "encoder_kv_heads", "encoder_intermediate_size",
       "text_hidden_size"});
  o.config_path = src.config_path;
  if (src.has_config) read_config_json(o.config_path, m);
  // validate() bounds the sizes wherever they came from (key or config.json).
  const encoder_kit::CheckpointKeys keys(r, src.folder_config);
  keys.dim("patch_size", m.patch_size);
  keys.dim("sam_image_size", m.sam_image_size);
  keys.dim("sam_hidden_size", m.sam_hidden_size);
  keys.dim("sam_layers", m.sam_layers);
  keys.dim("sam_heads", m.sam_heads);
  keys.dim("sam_mlp_dim", m.sam_mlp_dim);
  keys.dim("window_size", m.window_size);
  keys.int_list("global_attn_indexes", m.global_attn_indexes);
  keys.dim("neck_channels", m.neck_channels);
  keys.int_list("downsample_channels", m.downsample_channels);
  keys.dim("encoder_layers", m.encoder_layers);
  keys.dim("encoder_heads", m.encoder_heads);
  keys.dim("encoder_kv_heads", m.encoder_kv_heads);
  keys.dim("encoder_intermediate_size", m.encoder_intermediate_size);
  m.rope_theta = r.get<double>("rope_theta", m.rope_theta);
  keys.dim("text_hidden_size", m.text_hidden_size);
  m.global_size = r.get<int64_t>("global_size", m.global_size);
  m.tile_size = r.get<int64_t>("tile_size", m.tile_size);
  m.min_crops = r.get<int64_t>("min_crops", m.min_crops);
  m.max_crops = r.get<int64_t>("max_crops", m.max_crops);
  m.validate();

  o.dtype = encoder_kit::read_compute_dtype(r, p.device);
  const int64_t views = m.global_tokens();
  o.min_budget = r.get<int64_t>("min_budget", std::min(m.global_tokens(), m.local_tokens()));
  o.max_budget = r.get<int64_t>("max_budget", 8 * views);
  encoder_kit::require_in_range("deepseek_ocr2", "min_budget", o.min_budget, 1, kMaxBudget);
  // One image must fit each path's largest graph: its global view, its most crops.
  encoder_kit::require_in_range("deepseek_ocr2", "max_budget", o.max_budget,
                                std::max({o.min_budget, views, m.max_crops * m.local_tokens()}),
                                kMaxBudget);
  o.check_finite = encoder_kit::read_check_finite(r);
  encoder_kit::read_seed_and_tuning(r, o);
  // Before any weight is read: a misspelt key is named first.
  r.reject_unknown();
  return o;
}

Options parse_options(const eg_create_params* p) {
  encgraph::sdk::Config config(p->config, p->num_config, "deepseek_ocr2");
  return parse_options(config, *p);
}

}  // namespace dsocr2
