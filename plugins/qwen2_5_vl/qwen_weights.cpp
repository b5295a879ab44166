#include "qwen_weights.hpp"

#include <encoder_kit/checked.hpp>

#include <cmath>
#include <initializer_list>
#include <string>

namespace qwen {
namespace {

using encoder_kit::RandomInit;

RandomInit matrix(int64_t fan_in) {
  return RandomInit::normal(1.0 / std::sqrt(static_cast<double>(fan_in)));
}
const RandomInit kBias = RandomInit::normal(0.02);
const RandomInit kNorm = RandomInit::normal(0.1, 1.0);

}  // namespace

int64_t parameter_count(const VisionConfig& c) {
  const std::string what = "qwen2_5_vl: the tower's parameter count";
  auto mul = [&](std::initializer_list<int64_t> v) {
    return encoder_kit::checked_product(v, what);
  };
  const int64_t d = c.hidden_size, inter = c.intermediate_size, out = c.out_hidden_size;
  const int64_t merged = mul({d, c.merge_unit()});
  int64_t block = 0;  // norms, qkv, proj, gate/up/down with their biases
  for (int64_t v : {mul({2, d}), mul({3, d, d}), mul({3, d}), mul({d, d}), d, mul({3, inter, d}),
                    mul({2, inter}), d})
    block = encoder_kit::checked_add(block, v, what);
  int64_t n = mul({d, c.patch_dim()});
  for (int64_t v :
       {mul({c.depth, block}), d, mul({merged, merged}), merged, mul({out, merged}), out})
    n = encoder_kit::checked_add(n, v, what);
  return n;
}

Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& src) {
  encoder_kit::require_weights_fit(
      parameter_count(c), "qwen2_5_vl: the tower (depth " + std::to_string(c.depth) +
                              ", hidden_size " + std::to_string(c.hidden_size) +
                              ", intermediate_size " + std::to_string(c.intermediate_size) + ")");
  const int64_t d = c.hidden_size, inter = c.intermediate_size, merged = d * c.merge_unit();
  Weights w;
  // "visual." as released, "model.visual." as transformers >= 4.52 saves it.
  const std::string v = src.qwen_visual_prefix();
  w.patch_embed = src.load(v + "patch_embed.proj.weight",
                           {d, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size},
                           matrix(c.patch_dim()));
  w.blocks.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = v + "blocks." + std::to_string(i) + ".";
    BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    b.norm1 = src.load(p + "norm1.weight", {d}, kNorm);
    b.norm2 = src.load(p + "norm2.weight", {d}, kNorm);
    b.qkv_w = src.load(p + "attn.qkv.weight", {3 * d, d}, matrix(d));
    b.qkv_b = src.load(p + "attn.qkv.bias", {3 * d}, kBias);
    b.proj_w = src.load(p + "attn.proj.weight", {d, d}, matrix(d));
    b.proj_b = src.load(p + "attn.proj.bias", {d}, kBias);
    b.gate_w = src.load(p + "mlp.gate_proj.weight", {inter, d}, matrix(d));
    b.gate_b = src.load(p + "mlp.gate_proj.bias", {inter}, kBias);
    b.up_w = src.load(p + "mlp.up_proj.weight", {inter, d}, matrix(d));
    b.up_b = src.load(p + "mlp.up_proj.bias", {inter}, kBias);
    b.down_w = src.load(p + "mlp.down_proj.weight", {d, inter}, matrix(inter));
    b.down_b = src.load(p + "mlp.down_proj.bias", {d}, kBias);
  }
  w.ln_q = src.load(v + "merger.ln_q.weight", {d}, kNorm);
  w.mlp0_w = src.load(v + "merger.mlp.0.weight", {merged, merged}, matrix(merged));
  w.mlp0_b = src.load(v + "merger.mlp.0.bias", {merged}, kBias);
  w.mlp2_w = src.load(v + "merger.mlp.2.weight", {c.out_hidden_size, merged}, matrix(merged));
  w.mlp2_b = src.load(v + "merger.mlp.2.bias", {c.out_hidden_size}, kBias);
  return w;
}

}  // namespace qwen
