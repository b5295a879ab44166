#include "dsocr2_weights.hpp"

#include <encoder_kit/checked.hpp>
#include <encoder_kit/error.hpp>

#include <cmath>
#include <initializer_list>

namespace dsocr2 {
namespace {

using encoder_kit::RandomInit;
using encoder_kit::random_init::kBias;
using encoder_kit::random_init::matrix;
const RandomInit kNormW = encoder_kit::random_init::kNormWeight;
const RandomInit kNormB = RandomInit::normal(0.1);
const RandomInit kPos = RandomInit::normal(0.5);
const RandomInit kUnit = RandomInit::normal(1.0);

// The checkpoint's spelling of each tensor (docs/models/deepseek_ocr2.md table).
struct Names {
  bool release = true;
  std::string prefix;  // transformers layout: "model." or ""

  std::string sam(const std::string& release_leaf, const std::string& hf_leaf) const {
    return release ? "model.sam_model." + release_leaf
                   : prefix + "vision_tower.sam_encoder." + hf_leaf;
  }
  std::string layer(int64_t i, const std::string& leaf) const {
    const std::string n = std::to_string(i);
    if (release) return "model.sam_model.blocks." + n + "." + leaf;
    std::string hf = leaf;
    if (leaf.rfind("norm1", 0) == 0) hf = "layer_norm1" + leaf.substr(5);
    if (leaf.rfind("norm2", 0) == 0) hf = "layer_norm2" + leaf.substr(5);
    return prefix + "vision_tower.sam_encoder.layers." + n + "." + hf;
  }
  std::string enc(const std::string& leaf) const {
    return release ? "model.qwen2_model.model.model." + leaf
                   : prefix + "vision_tower.vision_encoder." + leaf;
  }
  std::string query(bool local) const {
    if (release)
      return local ? "model.qwen2_model.query_768.weight" : "model.qwen2_model.query_1024.weight";
    return prefix + (local ? "vision_tower.query_768_resolution.weight"
                           : "vision_tower.query_1024_resolution.weight");
  }
  std::string projector(const std::string& leaf) const {
    return release ? "model.projector.layers." + leaf : prefix + "multi_modal_projector." + leaf;
  }
  std::string separator() const {
    return release ? "model.view_seperator" : prefix + "view_separator";
  }
};

// Which layout the checkpoint uses, probed by its patch embedding (random
// weights: the release names).
Names detect(const encoder_kit::WeightSource& src) {
  if (src.is_random() || src.contains("model.sam_model.patch_embed.proj.weight")) return {};
  for (const char* prefix : {"model.", ""})
    if (src.contains(std::string(prefix) +
                     "vision_tower.sam_encoder.patch_embed.projection.weight"))
      return {false, prefix};
  encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                    "deepseek_ocr2: " + src.description() +
                        " holds no DeepSeek-OCR-2 vision tower: neither "
                        "'model.sam_model.patch_embed.proj.weight' (DeepSeek's release) nor "
                        "'[model.]vision_tower.sam_encoder.patch_embed.projection.weight' "
                        "(transformers); point plugin.weights at the model's checkpoint");
}

}  // namespace

int64_t parameter_count(const ModelConfig& c) {
  const std::string what = "deepseek_ocr2: the vision side's parameter count";
  auto mul = [&](std::initializer_list<int64_t> v) {
    return encoder_kit::checked_product(v, what);
  };
  int64_t s = 0;
  auto add = [&](int64_t v) { s = encoder_kit::checked_add(s, v, what); };
  const int64_t d = c.sam_hidden_size, e = c.encoder_hidden(), g = c.pos_grid();
  add(mul({d, 3, c.patch_size, c.patch_size}));
  add(mul({g, g, d}));
  add(mul({c.sam_layers, 12 * d + 4 * d * d + 2 * d * c.sam_mlp_dim + c.sam_mlp_dim}));
  add(mul({c.sam_layers, 2, 2 * g, c.sam_head_dim()}));
  add(mul({c.neck_channels, d + 9 * c.neck_channels + 4}));
  add(mul({9, c.downsample_channels[0], c.neck_channels + e}));
  add(mul({c.encoder_layers, 6 * e * e + 3 * e * c.encoder_intermediate_size}));
  add(mul({c.global_tokens() + c.local_tokens(), e}));
  add(mul({c.text_hidden_size, e + 2}));
  return s;
}

Weights load_weights(const ModelConfig& c, const encoder_kit::WeightSource& src) {
  encoder_kit::require_weights_fit(parameter_count(c),
                                   "deepseek_ocr2: the vision side (sam_hidden_size " +
                                       std::to_string(c.sam_hidden_size) + ", encoder width " +
                                       std::to_string(c.encoder_hidden()) + ", encoder_layers " +
                                       std::to_string(c.encoder_layers) + ")");
  const Names n = detect(src);
  const int64_t d = c.sam_hidden_size, hd = c.sam_head_dim(), p = c.patch_size, g = c.pos_grid();
  const int64_t C = c.neck_channels, c1 = c.downsample_channels[0], e = c.encoder_hidden();
  const int64_t eh = c.encoder_heads * c.encoder_head_dim();
  const int64_t kv = c.encoder_kv_heads * c.encoder_head_dim(), I = c.encoder_intermediate_size;
  Weights w;
  w.layout =
      n.release ? "DeepSeek release names" : "transformers names (prefix '" + n.prefix + "')";
  w.patch_w = src.load(n.sam("patch_embed.proj.weight", "patch_embed.projection.weight"),
                       {d, 3, p, p}, matrix(3 * p * p));
  w.patch_b = src.load(n.sam("patch_embed.proj.bias", "patch_embed.projection.bias"), {d}, kBias);
  w.pos_embed = src.load(n.sam("pos_embed", "pos_embed"), {1, g, g, d}, kPos);
  for (int64_t i = 0; i < c.sam_layers; ++i) {
    SamLayerWeights l;
    const int64_t rel = 2 * (c.is_global_layer(i) ? g : c.window_size) - 1;
    l.norm1_w = src.load(n.layer(i, "norm1.weight"), {d}, kNormW);
    l.norm1_b = src.load(n.layer(i, "norm1.bias"), {d}, kNormB);
    l.norm2_w = src.load(n.layer(i, "norm2.weight"), {d}, kNormW);
    l.norm2_b = src.load(n.layer(i, "norm2.bias"), {d}, kNormB);
    l.qkv_w = src.load(n.layer(i, "attn.qkv.weight"), {3 * d, d}, matrix(d));
    l.qkv_b = src.load(n.layer(i, "attn.qkv.bias"), {3 * d}, kBias);
    l.proj_w = src.load(n.layer(i, "attn.proj.weight"), {d, d}, matrix(d));
    l.proj_b = src.load(n.layer(i, "attn.proj.bias"), {d}, kBias);
    l.rel_h = src.load(n.layer(i, "attn.rel_pos_h"), {rel, hd}, kPos);
    l.rel_w = src.load(n.layer(i, "attn.rel_pos_w"), {rel, hd}, kPos);
    l.lin1_w = src.load(n.layer(i, "mlp.lin1.weight"), {c.sam_mlp_dim, d}, matrix(d));
    l.lin1_b = src.load(n.layer(i, "mlp.lin1.bias"), {c.sam_mlp_dim}, kBias);
    l.lin2_w = src.load(n.layer(i, "mlp.lin2.weight"), {d, c.sam_mlp_dim}, matrix(c.sam_mlp_dim));
    l.lin2_b = src.load(n.layer(i, "mlp.lin2.bias"), {d}, kBias);
    w.sam.push_back(std::move(l));
  }
  w.neck1_w = src.load(n.sam("neck.0.weight", "neck.conv1.weight"), {C, d, 1, 1}, matrix(d));
  w.neck_ln1_w = src.load(n.sam("neck.1.weight", "neck.layer_norm1.weight"), {C}, kNormW);
  w.neck_ln1_b = src.load(n.sam("neck.1.bias", "neck.layer_norm1.bias"), {C}, kNormB);
  w.neck2_w = src.load(n.sam("neck.2.weight", "neck.conv2.weight"), {C, C, 3, 3}, matrix(9 * C));
  w.neck_ln2_w = src.load(n.sam("neck.3.weight", "neck.layer_norm2.weight"), {C}, kNormW);
  w.neck_ln2_b = src.load(n.sam("neck.3.bias", "neck.layer_norm2.bias"), {C}, kNormB);
  w.down1_w = src.load(n.sam("net_2.weight", "proj.conv1.weight"), {c1, C, 3, 3}, matrix(9 * C));
  w.down2_w = src.load(n.sam("net_3.weight", "proj.conv2.weight"), {e, c1, 3, 3}, matrix(9 * c1));
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string b = "layers." + std::to_string(i) + ".";
    EncoderLayerWeights l;
    l.norm1 = src.load(n.enc(b + "input_layernorm.weight"), {e}, kNormW);
    l.norm2 = src.load(n.enc(b + "post_attention_layernorm.weight"), {e}, kNormW);
    l.q_w = src.load(n.enc(b + "self_attn.q_proj.weight"), {eh, e}, matrix(e));
    l.q_b = src.load(n.enc(b + "self_attn.q_proj.bias"), {eh}, kBias);
    l.k_w = src.load(n.enc(b + "self_attn.k_proj.weight"), {kv, e}, matrix(e));
    l.k_b = src.load(n.enc(b + "self_attn.k_proj.bias"), {kv}, kBias);
    l.v_w = src.load(n.enc(b + "self_attn.v_proj.weight"), {kv, e}, matrix(e));
    l.v_b = src.load(n.enc(b + "self_attn.v_proj.bias"), {kv}, kBias);
    l.o_w = src.load(n.enc(b + "self_attn.o_proj.weight"), {e, eh}, matrix(eh));
    l.gate_w = src.load(n.enc(b + "mlp.gate_proj.weight"), {I, e}, matrix(e));
    l.up_w = src.load(n.enc(b + "mlp.up_proj.weight"), {I, e}, matrix(e));
    l.down_w = src.load(n.enc(b + "mlp.down_proj.weight"), {e, I}, matrix(I));
    w.encoder.push_back(std::move(l));
  }
  w.encoder_norm = src.load(n.enc("norm.weight"), {e}, kNormW);
  w.query_local = src.load(n.query(true), {c.local_tokens(), e}, kUnit);
  w.query_global = src.load(n.query(false), {c.global_tokens(), e}, kUnit);
  w.proj_w = src.load(n.projector("weight"), {c.text_hidden_size, e}, matrix(e));
  w.proj_b = src.load(n.projector("bias"), {c.text_hidden_size}, kBias);
  w.view_separator = src.load(n.separator(), {c.text_hidden_size}, kUnit);
  return w;
}

}  // namespace dsocr2
