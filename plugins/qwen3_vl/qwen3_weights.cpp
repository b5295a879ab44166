#include "qwen3_weights.hpp"

#include <encoder_kit/checked.hpp>

#include <cmath>
#include <initializer_list>
#include <string>

namespace qwen3 {
namespace {

using encoder_kit::RandomInit;

RandomInit matrix(int64_t fan_in) {
  return RandomInit::normal(1.0 / std::sqrt(static_cast<double>(fan_in)));
}
const RandomInit kBias = RandomInit::normal(0.02);
const RandomInit kNormW = RandomInit::normal(0.1, 1.0);
const RandomInit kNormB = RandomInit::normal(0.1);
const RandomInit kPos = RandomInit::normal(0.5);

MergerWeights load_merger(const VisionConfig& c, const encoder_kit::WeightSource& src,
                          const std::string& p, int64_t norm_dim) {
  const int64_t merged = c.hidden_size * c.merge_unit();
  MergerWeights m;
  m.norm_w = src.load(p + "norm.weight", {norm_dim}, kNormW);
  m.norm_b = src.load(p + "norm.bias", {norm_dim}, kNormB);
  m.fc1_w = src.load(p + "linear_fc1.weight", {merged, merged}, matrix(merged));
  m.fc1_b = src.load(p + "linear_fc1.bias", {merged}, kBias);
  m.fc2_w = src.load(p + "linear_fc2.weight", {c.out_hidden_size, merged}, matrix(merged));
  m.fc2_b = src.load(p + "linear_fc2.bias", {c.out_hidden_size}, kBias);
  return m;
}

}  // namespace

int64_t parameter_count(const VisionConfig& c) {
  const std::string what = "qwen3_vl: the tower's parameter count";
  auto mul = [&](std::initializer_list<int64_t> v) {
    return encoder_kit::checked_product(v, what);
  };
  auto add = [&](std::initializer_list<int64_t> v) {
    int64_t s = 0;
    for (int64_t x : v) s = encoder_kit::checked_add(s, x, what);
    return s;
  };
  const int64_t d = c.hidden_size, inter = c.intermediate_size, out = c.out_hidden_size;
  const int64_t merged = mul({d, c.merge_unit()});
  const int64_t block =
      add({mul({4, d}), mul({3, d, d}), mul({3, d}), mul({d, d}), d, mul({2, inter, d}), inter, d});
  const int64_t merger = add({mul({merged, merged}), merged, mul({out, merged}), out});
  return add({mul({d, c.patch_dim()}), d, mul({c.num_position_embeddings, d}),
              mul({c.depth, block}), mul({2, d}), merger,
              mul({c.num_deepstack(), add({mul({2, merged}), merger})})});
}

Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& src) {
  encoder_kit::require_weights_fit(
      parameter_count(c), "qwen3_vl: the tower (depth " + std::to_string(c.depth) +
                              ", hidden_size " + std::to_string(c.hidden_size) +
                              ", intermediate_size " + std::to_string(c.intermediate_size) + ")");
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  Weights w;
  w.prefix = src.qwen_visual_prefix();
  const std::string& v = w.prefix;
  w.patch_embed_w = src.load(v + "patch_embed.proj.weight",
                             {d, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size},
                             matrix(c.patch_dim()));
  w.patch_embed_b = src.load(v + "patch_embed.proj.bias", {d}, kBias);
  w.pos_embed = src.load(v + "pos_embed.weight", {c.num_position_embeddings, d}, kPos);
  w.blocks.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = v + "blocks." + std::to_string(i) + ".";
    BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    b.norm1_w = src.load(p + "norm1.weight", {d}, kNormW);
    b.norm1_b = src.load(p + "norm1.bias", {d}, kNormB);
    b.norm2_w = src.load(p + "norm2.weight", {d}, kNormW);
    b.norm2_b = src.load(p + "norm2.bias", {d}, kNormB);
    b.qkv_w = src.load(p + "attn.qkv.weight", {3 * d, d}, matrix(d));
    b.qkv_b = src.load(p + "attn.qkv.bias", {3 * d}, kBias);
    b.proj_w = src.load(p + "attn.proj.weight", {d, d}, matrix(d));
    b.proj_b = src.load(p + "attn.proj.bias", {d}, kBias);
    b.fc1_w = src.load(p + "mlp.linear_fc1.weight", {inter, d}, matrix(d));
    b.fc1_b = src.load(p + "mlp.linear_fc1.bias", {inter}, kBias);
    b.fc2_w = src.load(p + "mlp.linear_fc2.weight", {d, inter}, matrix(inter));
    b.fc2_b = src.load(p + "mlp.linear_fc2.bias", {d}, kBias);
  }
  w.merger = load_merger(c, src, v + "merger.", d);
  for (int64_t k = 0; k < c.num_deepstack(); ++k)
    w.deepstack.push_back(load_merger(
        c, src, v + "deepstack_merger_list." + std::to_string(k) + ".", d * c.merge_unit()));
  return w;
}

}  // namespace qwen3
