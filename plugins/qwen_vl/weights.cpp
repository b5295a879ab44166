#include "weights.hpp"

#include "spec.hpp"

#include <encoder_kit/checked.hpp>

#include <cmath>
#include <initializer_list>
#include <string>

namespace qwen_vl {
namespace {

using encoder_kit::RandomInit;
using encoder_kit::random_init::kBias;
using encoder_kit::random_init::matrix;
const RandomInit kNormW = encoder_kit::random_init::kNormWeight;
const RandomInit kNormB = RandomInit::normal(0.1);
const RandomInit kPos = RandomInit::normal(0.5);

// A norm's weight, and its bias under Norm::Layer.
void load_norm(const VisionConfig& c, const encoder_kit::WeightSource& src, const std::string& name,
               int64_t dim, std::vector<float>& w, std::vector<float>& b) {
  w = src.load(name + ".weight", {dim}, kNormW);
  if (c.spec->norm == Norm::Layer) b = src.load(name + ".bias", {dim}, kNormB);
}

// `norm`, `fc1`, `fc2`: the checkpoint's names of the merger's parts.
MergerWeights load_merger(const VisionConfig& c, const encoder_kit::WeightSource& src,
                          const std::string& p, int64_t norm_dim, const char* norm, const char* fc1,
                          const char* fc2) {
  const int64_t merged = c.hidden_size * c.merge_unit();
  MergerWeights m;
  load_norm(c, src, p + norm, norm_dim, m.norm_w, m.norm_b);
  m.fc1_w = src.load(p + fc1 + ".weight", {merged, merged}, matrix(merged));
  m.fc1_b = src.load(p + fc1 + ".bias", {merged}, kBias);
  m.fc2_w = src.load(p + fc2 + ".weight", {c.out_hidden_size, merged}, matrix(merged));
  m.fc2_b = src.load(p + fc2 + ".bias", {c.out_hidden_size}, kBias);
  return m;
}

// Outputs::Downsample's parameters (post_layernorm, downsample, merger.*).
DownsampleWeights load_downsample(const VisionConfig& c, const encoder_kit::WeightSource& src,
                                  const std::string& v) {
  const int64_t d = c.hidden_size, out = c.out_hidden_size, wide = c.intermediate_size;
  const int64_t m = c.spatial_merge_size, units = c.merge_unit(), merged = d * units;
  DownsampleWeights g;
  std::vector<float> unused_bias;
  load_norm(c, src, v + "post_layernorm", d, g.post_norm_w, unused_bias);
  const std::vector<float> conv = src.load(v + "downsample.weight", {out, d, m, m}, matrix(merged));
  g.conv_w.resize(conv.size());
  for (int64_t o = 0; o < out; ++o)
    for (int64_t ch = 0; ch < d; ++ch)
      for (int64_t u = 0; u < units; ++u)  // u = i * m + j: kernel row i, column j
        g.conv_w[static_cast<size_t>(o * merged + u * d + ch)] =
            conv[static_cast<size_t>((o * d + ch) * units + u)];
  g.conv_b = src.load(v + "downsample.bias", {out}, kBias);
  const std::string p = v + "merger.";
  g.proj_w = src.load(p + "proj.weight", {out, out}, matrix(out));
  // nn.LayerNorm: weight and bias whatever the blocks' norm.
  g.norm_w = src.load(p + "post_projection_norm.weight", {out}, kNormW);
  g.norm_b = src.load(p + "post_projection_norm.bias", {out}, kNormB);
  g.gate_w = src.load(p + "gate_proj.weight", {wide, out}, matrix(out));
  g.up_w = src.load(p + "up_proj.weight", {wide, out}, matrix(out));
  g.down_w = src.load(p + "down_proj.weight", {out, wide}, matrix(wide));
  return g;
}

}  // namespace

int64_t parameter_count(const VisionConfig& c) {
  const Spec& s = *c.spec;
  const encoder_kit::CheckedCount n{std::string(s.name) + ": the tower's parameter count"};
  const int64_t d = c.hidden_size, inter = c.mlp_width(), out = c.out_hidden_size;
  const int64_t merged = n.mul({d, c.merge_unit()});
  const int64_t norm = s.norm == Norm::Layer ? 2 : 1;  // values per normalised feature
  const int64_t biases = s.block_biases ? 1 : 0;
  const int64_t mlp = s.mlp == Mlp::GatedSilu
                          ? n.sum({n.mul({3, inter, d}), n.mul({biases, n.sum({2 * inter, d})})})
                          : n.sum({n.mul({2, inter, d}), n.mul({biases, n.sum({inter, d})})});
  const int64_t block = n.sum({n.mul({2, norm, d}), n.mul({3, d, d}), c.attention_bias ? 3 * d : 0,
                               n.mul({d, d}), biases * d, mlp});
  int64_t head = 0;  // what follows the blocks
  if (s.outputs == Outputs::Downsample) {
    const int64_t wide = c.intermediate_size;
    head = n.sum({d, n.mul({out, merged}), out, n.mul({out, out}), 2 * out, n.mul({3, wide, out})});
  } else {
    const int64_t merger = n.sum({n.mul({merged, merged}), merged, n.mul({out, merged}), out});
    head = n.sum({n.mul({norm, d}), merger,
                  n.mul({c.num_deepstack(), n.sum({n.mul({norm, merged}), merger})})});
  }
  return n.sum({n.mul({d, c.patch_dim()}), s.patch_bias ? d : 0, s.post_conv_norm ? d : 0,
                n.mul({c.num_position_embeddings, d}), n.mul({c.depth, block}), head});
}

Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& src) {
  const Spec& s = *c.spec;
  encoder_kit::require_weights_fit(
      parameter_count(c), std::string(s.name) + ": the tower (depth " + std::to_string(c.depth) +
                              ", hidden_size " + std::to_string(c.hidden_size) +
                              ", intermediate_size " + std::to_string(c.intermediate_size) + ")");
  const int64_t d = c.hidden_size, inter = c.mlp_width();
  const bool gated = s.mlp == Mlp::GatedSilu, biases = s.block_biases;
  Weights w;
  // "visual." as released, "model.visual." as transformers >= 4.52 saves it.
  w.prefix = src.qwen_visual_prefix();
  const std::string& v = w.prefix;
  w.patch_embed_w = src.load(v + "patch_embed.proj.weight",
                             {d, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size},
                             matrix(c.patch_dim()));
  if (s.patch_bias) w.patch_embed_b = src.load(v + "patch_embed.proj.bias", {d}, kBias);
  if (s.post_conv_norm) {
    std::vector<float> bias;  // Norm::Rms: none
    load_norm(c, src, v + "post_conv_layernorm", d, w.post_conv_norm_w, bias);
  }
  if (s.pos_embed == PosEmbed::Interpolated)
    w.pos_embed = src.load(v + "pos_embed.weight", {c.num_position_embeddings, d}, kPos);
  if (s.pos_embed == PosEmbed::Bicubic)
    w.pos_embed =
        src.load(v + "embeddings.position_embedding.weight", {c.num_position_embeddings, d}, kPos);
  w.blocks.resize(static_cast<size_t>(c.depth));
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = v + "blocks." + std::to_string(i) + ".";
    BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    load_norm(c, src, p + "norm1", d, b.norm1_w, b.norm1_b);
    load_norm(c, src, p + "norm2", d, b.norm2_w, b.norm2_b);
    b.qkv_w = src.load(p + "attn.qkv.weight", {3 * d, d}, matrix(d));
    if (c.attention_bias) b.qkv_b = src.load(p + "attn.qkv.bias", {3 * d}, kBias);
    b.proj_w = src.load(p + "attn.proj.weight", {d, d}, matrix(d));
    if (biases) b.proj_b = src.load(p + "attn.proj.bias", {d}, kBias);
    const std::string fc1 = p + (gated ? "mlp.gate_proj" : "mlp.linear_fc1");
    const std::string fc2 = p + (gated ? "mlp.down_proj" : "mlp.linear_fc2");
    b.fc1_w = src.load(fc1 + ".weight", {inter, d}, matrix(d));
    if (biases) b.fc1_b = src.load(fc1 + ".bias", {inter}, kBias);
    if (gated) {
      b.up_w = src.load(p + "mlp.up_proj.weight", {inter, d}, matrix(d));
      if (biases) b.up_b = src.load(p + "mlp.up_proj.bias", {inter}, kBias);
    }
    b.fc2_w = src.load(fc2 + ".weight", {d, inter}, matrix(inter));
    if (biases) b.fc2_b = src.load(fc2 + ".bias", {d}, kBias);
  }
  if (s.outputs == Outputs::Downsample) {
    w.downsample = load_downsample(c, src, v);
    return w;
  }
  w.merger = load_merger(c, src, v + "merger.", d, s.merger_parts[0], s.merger_parts[1],
                         s.merger_parts[2]);
  for (int64_t k = 0; k < c.num_deepstack(); ++k)
    w.deepstack.push_back(load_merger(c, src,
                                      v + "deepstack_merger_list." + std::to_string(k) + ".",
                                      d * c.merge_unit(), "norm", "linear_fc1", "linear_fc2"));
  return w;
}

}  // namespace qwen_vl
