#include "siglip_reference.hpp"

#include "../reference_f64.hpp"

#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <random>

namespace siglip_ref {
namespace {

using ref64::add;
using ref64::gelu_tanh;
using ref64::layer_norm;
using ref64::Mat;

// nn.Linear with its bias.
Mat linear(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat& b, int64_t out) {
  return ref64::linear(x, n, in, w, &b, out);
}

Mat mlp(const Params& p, const std::string& prefix, const Mat& x, int64_t n, const Config& c) {
  Mat h = linear(x, n, c.hidden, p.at(prefix + "fc1.weight"), p.at(prefix + "fc1.bias"), c.inter);
  for (double& v : h) v = gelu_tanh(v);
  return linear(h, n, c.inter, p.at(prefix + "fc2.weight"), p.at(prefix + "fc2.bias"), c.hidden);
}

Mat slice(const Mat& m, size_t first, size_t count) {
  return Mat(m.begin() + static_cast<std::ptrdiff_t>(first),
             m.begin() + static_cast<std::ptrdiff_t>(first + count));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  return {{"num_hidden_layers", std::to_string(c.layers)},
          {"hidden_size", std::to_string(c.hidden)},
          {"num_attention_heads", std::to_string(c.heads)},
          {"intermediate_size", std::to_string(c.inter)},
          {"image_size", std::to_string(c.image)},
          {"patch_size", std::to_string(c.patch)},
          {"dtype", "f32"}};
}

std::vector<int64_t> shape_of(const Config& c, const std::string& name) {
  const int64_t d = c.hidden;
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name == "embeddings.patch_embedding.weight") return {d, 3, c.patch, c.patch};
  if (name == "embeddings.position_embedding.weight") return {c.tokens(), d};
  if (name == "head.probe") return {1, 1, d};
  if (name == "head.attention.in_proj_weight") return {3 * d, d};
  if (name == "head.attention.in_proj_bias") return {3 * d};
  if (ends("proj.weight")) return {d, d};  // q/k/v/out_proj, head out_proj
  if (ends("fc1.weight")) return {c.inter, d};
  if (ends("fc1.bias")) return {c.inter};
  if (ends("fc2.weight")) return {d, c.inter};
  return {d};  // biases of width hidden, norm weights and biases
}

Params random_params(const Config& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::string> names = {"embeddings.patch_embedding.weight",
                                    "embeddings.patch_embedding.bias",
                                    "embeddings.position_embedding.weight",
                                    "post_layernorm.weight",
                                    "post_layernorm.bias",
                                    "head.probe",
                                    "head.attention.in_proj_weight",
                                    "head.attention.in_proj_bias",
                                    "head.attention.out_proj.weight",
                                    "head.attention.out_proj.bias",
                                    "head.layernorm.weight",
                                    "head.layernorm.bias",
                                    "head.mlp.fc1.weight",
                                    "head.mlp.fc1.bias",
                                    "head.mlp.fc2.weight",
                                    "head.mlp.fc2.bias"};
  for (int64_t i = 0; i < c.layers; ++i)
    for (const char* s :
         {"layer_norm1.weight", "layer_norm1.bias", "self_attn.q_proj.weight",
          "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
          "self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.out_proj.weight",
          "self_attn.out_proj.bias", "layer_norm2.weight", "layer_norm2.bias", "mlp.fc1.weight",
          "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
      names.push_back("encoder.layers." + std::to_string(i) + "." + s);
  Params p;
  for (const std::string& n : names) {
    const std::vector<int64_t> shape = shape_of(c, n);
    size_t count = 1;
    for (int64_t e : shape) count *= static_cast<size_t>(e);
    const bool norm = n.find("norm") != std::string::npos;
    const bool weight = n.find("weight") != std::string::npos;
    double mean = 0, std = 0.05;
    if (norm && weight) {
      mean = 1.0, std = 0.1;
    } else if (n.find("position") != std::string::npos) {
      std = 0.2;
    } else if (n == "head.probe") {
      std = 1.0;
    } else if (weight) {
      std = 1.0 /
            std::sqrt(static_cast<double>(shape.size() == 4 ? 3 * c.patch * c.patch : shape[1]));
    }
    std::vector<double>& v = p[n];
    for (size_t i = 0; i < count; ++i)
      v.push_back(static_cast<float>(mean + std * normal(rng)));  // f32-representable
  }
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix, const std::set<std::string>& skip) {
  std::vector<encoder_kit::TensorToWrite> tensors;
  for (const auto& [name, values] : p) {
    if (skip.count(name)) continue;
    tensors.push_back(encoder_kit::f32_tensor(prefix + name, shape_of(c, name),
                                              std::vector<float>(values.begin(), values.end())));
  }
  encoder_kit::write_safetensors(file, tensors);
}

Outputs forward(const Config& c, const Params& p, const std::vector<uint8_t>& rgb) {
  const int64_t d = c.hidden, g = c.grid(), t = c.tokens(), ps = c.patch;
  // pixel_values[ch, y, x] = (v / 255 - 0.5) / 0.5, then the Conv2d (stride ==
  // kernel): token gy*g+gx, channel o.
  const Mat& conv = p.at("embeddings.patch_embedding.weight");
  const Mat& conv_b = p.at("embeddings.patch_embedding.bias");
  const Mat& pos = p.at("embeddings.position_embedding.weight");
  Mat x(static_cast<size_t>(t * d));
  for (int64_t gy = 0; gy < g; ++gy)
    for (int64_t gx = 0; gx < g; ++gx)
      for (int64_t o = 0; o < d; ++o) {
        double s = conv_b[o];
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t ky = 0; ky < ps; ++ky)
            for (int64_t kx = 0; kx < ps; ++kx) {
              const double v = rgb[((gy * ps + ky) * c.image + gx * ps + kx) * 3 + ch];
              s += (v / 255.0 - 0.5) / 0.5 * conv[((o * 3 + ch) * ps + ky) * ps + kx];
            }
        const int64_t token = gy * g + gx;
        x[token * d + o] = s + pos[token * d + o];
      }
  Outputs out;
  out.hidden_states.push_back(x);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "encoder.layers." + std::to_string(i) + ".";
    auto w = [&](const std::string& n) -> const Mat& { return p.at(l + n); };
    const Mat h = layer_norm(x, t, d, w("layer_norm1.weight"), w("layer_norm1.bias"), c.eps);
    const Mat q = linear(h, t, d, w("self_attn.q_proj.weight"), w("self_attn.q_proj.bias"), d);
    const Mat k = linear(h, t, d, w("self_attn.k_proj.weight"), w("self_attn.k_proj.bias"), d);
    const Mat v = linear(h, t, d, w("self_attn.v_proj.weight"), w("self_attn.v_proj.bias"), d);
    const Mat a = ref64::attention(q, t, k, v, t, c.heads, c.hidden);
    x = add(x, linear(a, t, d, w("self_attn.out_proj.weight"), w("self_attn.out_proj.bias"), d));
    x = add(x,
            mlp(p, l + "mlp.",
                layer_norm(x, t, d, w("layer_norm2.weight"), w("layer_norm2.bias"), c.eps), t, c));
    out.hidden_states.push_back(x);
  }
  out.last_hidden_state =
      layer_norm(x, t, d, p.at("post_layernorm.weight"), p.at("post_layernorm.bias"), c.eps);

  // nn.MultiheadAttention(probe, h, h): in_proj rows [q; k; v], then out_proj.
  const Mat& in_w = p.at("head.attention.in_proj_weight");
  const Mat& in_b = p.at("head.attention.in_proj_bias");
  const size_t dd = static_cast<size_t>(d * d), ud = static_cast<size_t>(d);
  const Mat& h = out.last_hidden_state;
  const Mat q = linear(p.at("head.probe"), 1, d, slice(in_w, 0, dd), slice(in_b, 0, ud), d);
  const Mat k = linear(h, t, d, slice(in_w, dd, dd), slice(in_b, ud, ud), d);
  const Mat v = linear(h, t, d, slice(in_w, 2 * dd, dd), slice(in_b, 2 * ud, ud), d);
  const Mat a =
      linear(ref64::attention(q, 1, k, v, t, c.heads, c.hidden), 1, d,
             p.at("head.attention.out_proj.weight"), p.at("head.attention.out_proj.bias"), d);
  const Mat n =
      layer_norm(a, 1, d, p.at("head.layernorm.weight"), p.at("head.layernorm.bias"), c.eps);
  out.pooled = add(a, mlp(p, "head.mlp.", n, 1, c));
  return out;
}

std::vector<uint8_t> random_pixels(int64_t height, int64_t width, int64_t channels, uint64_t seed) {
  return ref64::random_pixels(height, width, channels, seed);
}

}  // namespace siglip_ref
