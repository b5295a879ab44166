#include "internvl_weights.hpp"

#include <encoder_kit/checked.hpp>

#include <cmath>
#include <initializer_list>
#include <string>

namespace internvl {
namespace {

using encoder_kit::RandomInit;
using encoder_kit::random_init::kBias;
using encoder_kit::random_init::kNormWeight;
using encoder_kit::random_init::matrix;
using Reader = encoder_kit::PrefixedReader;
const RandomInit kNormBias = RandomInit::normal(0.05);

// w[r, :] *= scale[r], b[r] *= scale[r]: lambda * (W a + b).
void fold_scale(std::vector<float>& w, std::vector<float>& b, const std::vector<float>& scale) {
  const size_t rows = scale.size(), cols = w.size() / rows;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t k = 0; k < cols; ++k) w[r * cols + k] *= scale[r];
    b[r] *= scale[r];
  }
}

LayerWeights load_layer(const Reader& read, const ModelConfig& c, int64_t i) {
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  const std::string p = "vision_tower.encoder.layer." + std::to_string(i) + ".";
  LayerWeights l;
  auto norm = [&](const std::string& n, std::vector<float>& w, std::vector<float>& b) {
    w = read(p + n + ".weight", {d}, kNormWeight);
    if (!c.rms_norm) b = read(p + n + ".bias", {d}, kNormBias);
  };
  norm("layernorm_before", l.norm1_w, l.norm1_b);
  encoder_kit::read_fused_qkv(read, p + "attention.", d, c.attention_bias, l.qkv_w, l.qkv_b);
  if (c.use_qk_norm) {
    l.q_norm = read(p + "attention.q_norm.weight", {d}, kNormWeight);
    l.k_norm = read(p + "attention.k_norm.weight", {d}, kNormWeight);
  }
  l.proj_w = read(p + "attention.projection_layer.weight", {d, d}, matrix(d));
  l.proj_b = read(p + "attention.projection_layer.bias", {d}, kBias);
  const RandomInit scale = RandomInit::normal(0.1, 0.5);
  fold_scale(l.proj_w, l.proj_b, read(p + "lambda_1", {d}, scale));
  norm("layernorm_after", l.norm2_w, l.norm2_b);
  l.fc1_w = read(p + "mlp.fc1.weight", {inter, d}, matrix(d));
  l.fc1_b = read(p + "mlp.fc1.bias", {inter}, kBias);
  l.fc2_w = read(p + "mlp.fc2.weight", {d, inter}, matrix(inter));
  l.fc2_b = read(p + "mlp.fc2.bias", {d}, kBias);
  fold_scale(l.fc2_w, l.fc2_b, read(p + "lambda_2", {d}, scale));
  return l;
}

int64_t parameter_count(const ModelConfig& c) {
  const encoder_kit::CheckedCount n{"internvl: the encoder's parameter count"};
  const int64_t d = c.hidden_size, inter = c.intermediate_size, t = c.text_hidden_size;
  const int64_t layer = n.sum({n.mul({4, d, d}), n.mul({12, d}), n.mul({2, inter, d}), inter});
  return n.sum({n.mul({d, c.patch_cols()}), n.mul({c.seq_per_tile() + 2, d}),
                n.mul({c.num_hidden_layers, layer}), n.mul({t, c.shuffled_width()}), n.mul({t, t}),
                n.mul({3, c.shuffled_width()}), n.mul({2, t})});
}

}  // namespace

Weights load_weights(const Options& o, const encoder_kit::WeightSource& source) {
  const ModelConfig& c = o.model;
  encoder_kit::require_weights_fit(parameter_count(c),
                                   "internvl: the encoder (num_hidden_layers " +
                                       std::to_string(c.num_hidden_layers) + ", hidden_size " +
                                       std::to_string(c.hidden_size) + ", intermediate_size " +
                                       std::to_string(c.intermediate_size) + ", text_hidden_size " +
                                       std::to_string(c.text_hidden_size) + ")");
  const Reader read{source, o.weight_prefix};
  const int64_t d = c.hidden_size, pv = c.patch_values(), cols = c.patch_cols();
  const int64_t sw = c.shuffled_width(), t = c.text_hidden_size;
  Weights w;
  const std::string e = "vision_tower.embeddings.";
  const std::vector<float> conv = read(e + "patch_embeddings.projection.weight",
                                       {d, c.num_channels, c.patch_size, c.patch_size}, matrix(pv));
  w.patch_w.assign(static_cast<size_t>(d * cols), 0.0f);
  for (int64_t r = 0; r < d; ++r)
    std::copy(conv.begin() + r * pv, conv.begin() + (r + 1) * pv, w.patch_w.begin() + r * cols);
  w.patch_b = read(e + "patch_embeddings.projection.bias", {d}, kBias);
  // The tiles are always image_size: positions are used as stored (transformers
  // interpolates them only for another size).
  const std::vector<float> pos =
      read(e + "position_embeddings", {1, c.seq_per_tile(), d}, RandomInit::normal(0.2));
  w.cls = read(e + "cls_token", {1, 1, d}, RandomInit::normal(0.2));
  for (int64_t k = 0; k < d; ++k) w.cls[k] += pos[k];
  w.pos.assign(pos.begin() + d, pos.end());
  for (int64_t i = 0; i < c.layers_to_run(); ++i) w.layers.push_back(load_layer(read, c, i));
  if (c.uses_final_layernorm()) {
    w.final_w = read("vision_tower.layernorm.weight", {d}, kNormWeight);
    w.final_b = read("vision_tower.layernorm.bias", {d}, kNormBias);
  }
  const std::string m = "multi_modal_projector.";
  w.proj_ln_w = read(m + "layer_norm.weight", {sw}, kNormWeight);
  w.proj_ln_b = read(m + "layer_norm.bias", {sw}, kNormBias);
  w.proj1_w = read(m + "linear_1.weight", {t, sw}, matrix(sw));
  w.proj1_b = read(m + "linear_1.bias", {t}, kBias);
  w.proj2_w = read(m + "linear_2.weight", {t, t}, matrix(t));
  w.proj2_b = read(m + "linear_2.bias", {t}, kBias);
  return w;
}

}  // namespace internvl
