#include "glm4v_reference.hpp"

#include "../qwen_family_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace glm4v_ref {
namespace {

using qwen_family_ref::Mat;
using ref64::gelu_erf;
using ref64::linear;
using ref64::rms_norm;

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

// Keys' cubic convolution kernel with A = -0.75 (torch's bicubic).
double cubic(double s) {
  constexpr double A = -0.75;
  s = std::fabs(s);
  if (s <= 1.0) return ((A + 2.0) * s - (A + 3.0)) * s * s + 1.0;
  if (s < 2.0) return ((A * s - 5.0 * A) * s + 8.0 * A) * s - 4.0 * A;
  return 0.0;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> shapes(const Config& c) {
  const int64_t d = c.hidden, m = c.merge;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"patch_embed.proj.weight", {d, 3, c.temporal, c.patch, c.patch}},
      {"patch_embed.proj.bias", {d}},
      {"post_conv_layernorm.weight", {d}},
      {"embeddings.position_embedding.weight", {c.pos_side * c.pos_side, d}}};
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    s.push_back({p + "norm1.weight", {d}});
    s.push_back({p + "norm2.weight", {d}});
    s.push_back({p + "attn.qkv.weight", {3 * d, d}});
    if (c.attention_bias) s.push_back({p + "attn.qkv.bias", {3 * d}});
    s.push_back({p + "attn.proj.weight", {d, d}});
    s.push_back({p + "mlp.gate_proj.weight", {c.out, d}});
    s.push_back({p + "mlp.up_proj.weight", {c.out, d}});
    s.push_back({p + "mlp.down_proj.weight", {d, c.out}});
  }
  s.push_back({"post_layernorm.weight", {d}});
  s.push_back({"downsample.weight", {c.out, d, m, m}});
  s.push_back({"downsample.bias", {c.out}});
  s.push_back({"merger.proj.weight", {c.out, c.out}});
  s.push_back({"merger.post_projection_norm.weight", {c.out}});
  s.push_back({"merger.post_projection_norm.bias", {c.out}});
  s.push_back({"merger.gate_proj.weight", {c.inter, c.out}});
  s.push_back({"merger.up_proj.weight", {c.inter, c.out}});
  s.push_back({"merger.down_proj.weight", {c.out, c.inter}});
  return s;
}

// down(silu(gate(x)) * up(x)), no biases (Glm4VisionMlp and the merger's tail).
Mat gated(const Mat& x, int64_t n, int64_t d, int64_t width, const Mat& gate, const Mat& up,
          const Mat& down) {
  Mat g = linear(x, n, d, gate, nullptr, width);
  const Mat u = linear(x, n, d, up, nullptr, width);
  for (size_t k = 0; k < g.size(); ++k) g[k] = silu(g[k]) * u[k];
  return linear(g, n, width, down, nullptr, d);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  return {{"depth", std::to_string(c.depth)},
          {"hidden_size", std::to_string(c.hidden)},
          {"num_heads", std::to_string(c.heads)},
          {"intermediate_size", std::to_string(c.inter)},
          {"out_hidden_size", std::to_string(c.out)},
          {"patch_size", std::to_string(c.patch)},
          {"temporal_patch_size", std::to_string(c.temporal)},
          {"spatial_merge_size", std::to_string(c.merge)},
          {"image_size", std::to_string(c.image_size())},
          {"attention_bias", c.attention_bias ? "true" : "false"},
          // Both temporal copies of an image count: 56x56 .. 112x224 pixels
          // per frame stay as they are.
          {"min_pixels", std::to_string(2 * 56 * 56)},
          {"max_pixels", std::to_string(2 * 112 * 224)},
          {"video_min_pixels", std::to_string(2 * 56 * 56)},
          {"video_max_pixels", std::to_string(4 * 112 * 224)},
          {"min_budget", "4"},
          {"max_budget", "64"}};
}

std::string config_json(const Config& c, const std::string& model_type) {
  auto num = [](int64_t v) { return std::to_string(v); };
  char eps[32];
  std::snprintf(eps, sizeof(eps), "%.17g", c.eps);
  return "{\"model_type\": \"" + model_type + "\", \"vision_config\": {\"model_type\": \"" +
         model_type + "\", \"depth\": " + num(c.depth) + ", \"hidden_size\": " + num(c.hidden) +
         ", \"num_heads\": " + num(c.heads) + ", \"intermediate_size\": " + num(c.inter) +
         ", \"out_hidden_size\": " + num(c.out) + ", \"patch_size\": " + num(c.patch) +
         ", \"temporal_patch_size\": " + num(c.temporal) +
         ", \"spatial_merge_size\": " + num(c.merge) + ", \"in_channels\": 3" +
         ", \"image_size\": " + num(c.image_size()) +
         ", \"attention_bias\": " + (c.attention_bias ? "true" : "false") +
         ", \"rms_norm_eps\": " + eps + ", \"hidden_act\": \"silu\"}}";
}

Params random_params(const Config& c, uint64_t seed, const std::string& prefix) {
  return qwen_family_ref::random_params(shapes(c), seed, prefix, [](const std::string& name) {
    return name.find("position_embedding") != std::string::npos;
  });
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix) {
  qwen_family_ref::write_params(shapes(c), p, file, prefix);
}

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed) {
  return ref64::random_pixels(frames * height, width, 3, seed);
}

Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width) {
  const double mean[3] = {0.48145466, 0.4578275, 0.40821073};
  const double stdv[3] = {0.26862954, 0.26130258, 0.27577711};
  const int64_t tp = c.temporal, p = c.patch;
  const int64_t padded = (frames + tp - 1) / tp * tp;
  return Input{
      padded / tp, height / p, width / p,
      qwen_family_ref::patch_rows(pixels, frames, height, width, tp, p, c.merge, mean, stdv)};
}

std::vector<std::vector<double>> forward(const Config& c, const Params& P,
                                         const std::vector<Input>& items,
                                         const std::string& prefix) {
  Params W;  // names without the prefix
  for (const auto& [k, v] : P) W[k.substr(prefix.size())] = v;
  const int64_t d = c.hidden, hd = c.head_dim(), m = c.merge, N = c.pos_side;
  int64_t n = 0;
  for (const Input& it : items) n += it.t * it.h * it.w;

  // Patch embedding, then post_conv_layernorm.
  Mat rows;
  for (const Input& it : items) rows.insert(rows.end(), it.rows.begin(), it.rows.end());
  Mat x = linear(rows, n, c.patch_dim(), W.at("patch_embed.proj.weight"),
                 &W.at("patch_embed.proj.bias"), d);
  x = rms_norm(x, n, d, W.at("post_conv_layernorm.weight"), c.eps);

  // rot_pos_emb's (row, column) per patch: merge blocks row-major, the
  // block's patches row-major, repeated per temporal patch. The embeddings
  // sample the N x N table at ((w + 0.5) / W) * 2 - 1 (x) and the same for
  // rows (y), grid_sample unnormalising to ((g + 1) * N - 1) / 2 and taking
  // the 4 x 4 taps around it, indices clamped (border padding).
  const Mat& table = W.at("embeddings.position_embedding.weight");
  std::vector<std::pair<int64_t, int64_t>> pos_ids;
  std::vector<int64_t> cu = {0};
  int64_t row = 0;
  for (const Input& it : items)
    for (int64_t t = 0; t < it.t; ++t) {
      for (int64_t bh = 0; bh < it.h / m; ++bh)
        for (int64_t bw = 0; bw < it.w / m; ++bw)
          for (int64_t mh = 0; mh < m; ++mh)
            for (int64_t mw = 0; mw < m; ++mw, ++row) {
              const int64_t y = bh * m + mh, xx = bw * m + mw;
              pos_ids.push_back({y, xx});
              const double gx = (xx + 0.5) / static_cast<double>(it.w) * 2.0 - 1.0;
              const double gy = (y + 0.5) / static_cast<double>(it.h) * 2.0 - 1.0;
              const double ix = ((gx + 1.0) * N - 1.0) / 2.0, iy = ((gy + 1.0) * N - 1.0) / 2.0;
              const auto x0 = static_cast<int64_t>(std::floor(ix));
              const auto y0 = static_cast<int64_t>(std::floor(iy));
              for (int64_t a = y0 - 1; a <= y0 + 2; ++a)
                for (int64_t b = x0 - 1; b <= x0 + 2; ++b) {
                  const double wt =
                      cubic(iy - static_cast<double>(a)) * cubic(ix - static_cast<double>(b));
                  const int64_t ya = std::clamp<int64_t>(a, 0, N - 1);
                  const int64_t xb = std::clamp<int64_t>(b, 0, N - 1);
                  for (int64_t j = 0; j < d; ++j)
                    x[row * d + j] += wt * table[(ya * N + xb) * d + j];
                }
            }
      cu.push_back(cu.back() + it.h * it.w);
    }
  const Mat angles = qwen_family_ref::rotary_angles(pos_ids, hd);

  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    Mat h = rms_norm(x, n, d, W.at(p + "norm1.weight"), c.eps);
    Mat qkv = linear(h, n, d, W.at(p + "attn.qkv.weight"),
                     c.attention_bias ? &W.at(p + "attn.qkv.bias") : nullptr, 3 * d);
    qwen_family_ref::apply_rotary(qkv, n, d, c.heads, angles);
    const Mat attn = qwen_family_ref::segment_attention(qkv, n, d, c.heads, cu);
    const Mat o = linear(attn, n, d, W.at(p + "attn.proj.weight"), nullptr, d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += o[k];
    h = rms_norm(x, n, d, W.at(p + "norm2.weight"), c.eps);
    const Mat o2 = gated(h, n, d, c.out, W.at(p + "mlp.gate_proj.weight"),
                         W.at(p + "mlp.up_proj.weight"), W.at(p + "mlp.down_proj.weight"));
    for (size_t k = 0; k < x.size(); ++k) x[k] += o2[k];
  }
  x = rms_norm(x, n, d, W.at("post_layernorm.weight"), c.eps);

  // downsample: view(-1, m, m, d).permute(0, 3, 1, 2), Conv2d(kernel = stride = m).
  const int64_t tokens = n / (m * m);
  const Mat& cw = W.at("downsample.weight");  // [out, d, m, m]
  const Mat& cb = W.at("downsample.bias");
  Mat ds(static_cast<size_t>(tokens * c.out));
  for (int64_t u = 0; u < tokens; ++u)
    for (int64_t o = 0; o < c.out; ++o) {
      double s = cb[o];
      for (int64_t ch = 0; ch < d; ++ch)
        for (int64_t a = 0; a < m; ++a)
          for (int64_t b = 0; b < m; ++b)
            s += cw[((o * d + ch) * m + a) * m + b] * x[(u * m * m + a * m + b) * d + ch];
      ds[u * c.out + o] = s;
    }
  // Glm4vVisionPatchMerger.
  Mat hm = linear(ds, tokens, c.out, W.at("merger.proj.weight"), nullptr, c.out);
  hm = ref64::layer_norm(hm, tokens, c.out, W.at("merger.post_projection_norm.weight"),
                         W.at("merger.post_projection_norm.bias"), 1e-5);  // nn.LayerNorm's default
  for (double& v : hm) v = gelu_erf(v);
  const Mat merged = gated(hm, tokens, c.out, c.inter, W.at("merger.gate_proj.weight"),
                           W.at("merger.up_proj.weight"), W.at("merger.down_proj.weight"));

  std::vector<Mat> out;
  int64_t tok = 0;
  for (const Input& it : items) {
    const int64_t nt = it.t * it.h * it.w / (m * m);
    out.push_back(Mat(merged.begin() + tok * c.out, merged.begin() + (tok + nt) * c.out));
    tok += nt;
  }
  return out;
}

}  // namespace glm4v_ref
