#include "siglip_weights.hpp"

#include <encoder_kit/checked.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <string>

namespace siglip {
namespace {

using encoder_kit::RandomInit;
using encoder_kit::random_init::kBias;
using encoder_kit::random_init::kNormWeight;
using encoder_kit::random_init::matrix;
using Reader = encoder_kit::PrefixedReader;
const RandomInit kNormBias = RandomInit::normal(0.05);

std::vector<float> slice(const std::vector<float>& v, size_t first, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(first),
          v.begin() + static_cast<std::ptrdiff_t>(first + count)};
}

LayerWeights load_layer(const Reader& read, const VisionConfig& c, int64_t i) {
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  const std::string p = "encoder.layers." + std::to_string(i) + ".";
  LayerWeights l;
  l.norm1_w = read(p + "layer_norm1.weight", {d}, kNormWeight);
  l.norm1_b = read(p + "layer_norm1.bias", {d}, kNormBias);
  encoder_kit::read_fused_qkv(read, p + "self_attn.", d, /*bias=*/true, l.qkv_w, l.qkv_b);
  l.proj_w = read(p + "self_attn.out_proj.weight", {d, d}, matrix(d));
  l.proj_b = read(p + "self_attn.out_proj.bias", {d}, kBias);
  l.norm2_w = read(p + "layer_norm2.weight", {d}, kNormWeight);
  l.norm2_b = read(p + "layer_norm2.bias", {d}, kNormBias);
  l.fc1_w = read(p + "mlp.fc1.weight", {inter, d}, matrix(d));
  l.fc1_b = read(p + "mlp.fc1.bias", {inter}, kBias);
  l.fc2_w = read(p + "mlp.fc2.weight", {d, inter}, matrix(inter));
  l.fc2_b = read(p + "mlp.fc2.bias", {d}, kBias);
  return l;
}

HeadWeights load_head(const Reader& read, const VisionConfig& c) {
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  const size_t ud = static_cast<size_t>(d);
  HeadWeights h;
  const std::vector<float> probe = read("head.probe", {1, 1, d}, RandomInit::normal(1.0));
  const std::vector<float> in_w = read("head.attention.in_proj_weight", {3 * d, d}, matrix(d));
  const std::vector<float> in_b = read("head.attention.in_proj_bias", {3 * d}, kBias);
  // q = probe · W_q^T + b_q in double: one row, computed once.
  h.query.resize(ud);
  for (size_t o = 0; o < ud; ++o) {
    double s = in_b[o];
    for (size_t k = 0; k < ud; ++k) s += static_cast<double>(probe[k]) * in_w[o * ud + k];
    h.query[o] = static_cast<float>(s);
  }
  h.kv_w = slice(in_w, ud * ud, 2 * ud * ud);
  h.kv_b = slice(in_b, ud, 2 * ud);
  h.out_w = read("head.attention.out_proj.weight", {d, d}, matrix(d));
  h.out_b = read("head.attention.out_proj.bias", {d}, kBias);
  h.ln_w = read("head.layernorm.weight", {d}, kNormWeight);
  h.ln_b = read("head.layernorm.bias", {d}, kNormBias);
  h.fc1_w = read("head.mlp.fc1.weight", {inter, d}, matrix(d));
  h.fc1_b = read("head.mlp.fc1.bias", {inter}, kBias);
  h.fc2_w = read("head.mlp.fc2.weight", {d, inter}, matrix(inter));
  h.fc2_b = read("head.mlp.fc2.bias", {d}, kBias);
  return h;
}

}  // namespace

int64_t parameter_count(const Options& o) {
  const VisionConfig& c = o.model;
  const encoder_kit::CheckedCount n{"siglip: the tower's parameter count"};
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  // Norms, attention (4 projections with biases), the MLP; the head is alike.
  const int64_t layer = n.sum({n.mul({4, d, d}), n.mul({8, d}), n.mul({2, inter, d}), inter, d});
  return n.sum({n.mul({d, c.patch_cols()}), d, n.mul({c.tokens_per_image(), d}),
                n.mul({c.num_hidden_layers, layer}), layer, n.mul({3, d})});
}

Weights load_weights(const Options& o, const encoder_kit::WeightSource& source) {
  const VisionConfig& c = o.model;
  encoder_kit::require_weights_fit(parameter_count(o),
                                   "siglip: the tower (num_hidden_layers " +
                                       std::to_string(c.num_hidden_layers) + ", hidden_size " +
                                       std::to_string(c.hidden_size) + ", intermediate_size " +
                                       std::to_string(c.intermediate_size) + ")");
  const Reader read{source, o.weight_prefix};
  const int64_t d = c.hidden_size, pv = c.patch_values(), cols = c.patch_cols();
  Weights w;
  const std::vector<float> conv = read("embeddings.patch_embedding.weight",
                                       {d, c.num_channels, c.patch_size, c.patch_size}, matrix(pv));
  w.patch_w.assign(static_cast<size_t>(d * cols), 0.0f);
  for (int64_t r = 0; r < d; ++r)
    std::copy(conv.begin() + r * pv, conv.begin() + (r + 1) * pv, w.patch_w.begin() + r * cols);
  w.patch_b = read("embeddings.patch_embedding.bias", {d}, kBias);
  w.pos = read("embeddings.position_embedding.weight", {c.tokens_per_image(), d},
               RandomInit::normal(0.2));
  for (int64_t i = 0; i < o.layers_to_run(); ++i) w.layers.push_back(load_layer(read, c, i));
  if (o.uses_post_layernorm()) {
    w.post_ln_w = read("post_layernorm.weight", {d}, kNormWeight);
    w.post_ln_b = read("post_layernorm.bias", {d}, kNormBias);
  }
  if (o.needs_head()) w.head = load_head(read, c);
  return w;
}

}  // namespace siglip
