#include "internvl_reference.hpp"

#include "../reference_f64.hpp"

#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <random>

namespace internvl_ref {
namespace {

using ref64::layer_norm;
using ref64::linear;
using ref64::Mat;
using ref64::rms_norm;

std::vector<std::pair<std::string, std::vector<int64_t>>> names_and_shapes(const Config& c) {
  const int64_t d = c.hidden, sw = d * c.shuffle * c.shuffle, seq = c.grid() * c.grid() + 1;
  std::vector<std::pair<std::string, std::vector<int64_t>>> v = {
      {"vision_tower.embeddings.cls_token", {1, 1, d}},
      {"vision_tower.embeddings.patch_embeddings.projection.weight", {d, 3, c.patch, c.patch}},
      {"vision_tower.embeddings.patch_embeddings.projection.bias", {d}},
      {"vision_tower.embeddings.position_embeddings", {1, seq, d}},
      {"multi_modal_projector.layer_norm.weight", {sw}},
      {"multi_modal_projector.layer_norm.bias", {sw}},
      {"multi_modal_projector.linear_1.weight", {c.text, sw}},
      {"multi_modal_projector.linear_1.bias", {c.text}},
      {"multi_modal_projector.linear_2.weight", {c.text, c.text}},
      {"multi_modal_projector.linear_2.bias", {c.text}}};
  if (!c.mean_pooling) {
    v.push_back({"vision_tower.layernorm.weight", {d}});
    v.push_back({"vision_tower.layernorm.bias", {d}});
  }
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "vision_tower.encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"layernorm_before", "layernorm_after"}) {
      v.push_back({l + n + ".weight", {d}});
      if (!c.rms_norm) v.push_back({l + n + ".bias", {d}});
    }
    for (const char* n : {"q_proj", "k_proj", "v_proj"}) {
      v.push_back({l + "attention." + n + ".weight", {d, d}});
      if (c.attention_bias) v.push_back({l + "attention." + n + ".bias", {d}});
    }
    if (c.qk_norm) {
      v.push_back({l + "attention.q_norm.weight", {d}});
      v.push_back({l + "attention.k_norm.weight", {d}});
    }
    v.push_back({l + "attention.projection_layer.weight", {d, d}});
    v.push_back({l + "attention.projection_layer.bias", {d}});
    v.push_back({l + "lambda_1", {d}});
    v.push_back({l + "lambda_2", {d}});
    v.push_back({l + "mlp.fc1.weight", {c.inter, d}});
    v.push_back({l + "mlp.fc1.bias", {c.inter}});
    v.push_back({l + "mlp.fc2.weight", {d, c.inter}});
    v.push_back({l + "mlp.fc2.bias", {d}});
  }
  return v;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  return {{"num_hidden_layers", std::to_string(c.layers)},
          {"hidden_size", std::to_string(c.hidden)},
          {"num_attention_heads", std::to_string(c.heads)},
          {"intermediate_size", std::to_string(c.inter)},
          {"image_size", std::to_string(c.image)},
          {"patch_size", std::to_string(c.patch)},
          {"text_hidden_size", std::to_string(c.text)},
          {"downsample_ratio", std::to_string(1.0 / static_cast<double>(c.shuffle))},
          {"norm_type", c.rms_norm ? "rms_norm" : "layer_norm"},
          {"use_qk_norm", c.qk_norm ? "true" : "false"},
          {"attention_bias", c.attention_bias ? "true" : "false"},
          {"use_mean_pooling", c.mean_pooling ? "true" : "false"},
          {"vision_feature_layer", std::to_string(c.feature_layer)},
          {"dtype", "f32"}};
}

Params random_params(const Config& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Params p;
  for (const auto& [n, shape] : names_and_shapes(c)) {
    size_t count = 1;
    for (int64_t e : shape) count *= static_cast<size_t>(e);
    const bool norm = n.find("norm") != std::string::npos;
    const bool weight = n.find("weight") != std::string::npos;
    double mean = 0, std = 0.05;
    if (norm && weight) {
      mean = 1.0, std = 0.1;
    } else if (n.find("lambda") != std::string::npos) {
      mean = 0.5, std = 0.1;
    } else if (n.find("position") != std::string::npos || n.find("cls") != std::string::npos) {
      std = 0.2;
    } else if (weight) {
      std = 1.0 / std::sqrt(static_cast<double>(count / static_cast<size_t>(shape[0])));
    }
    std::vector<double>& v = p[n];
    for (size_t i = 0; i < count; ++i) v.push_back(static_cast<float>(mean + std * normal(rng)));
  }
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix) {
  std::vector<encoder_kit::TensorToWrite> tensors;
  for (const auto& [name, shape] : names_and_shapes(c)) {
    const std::vector<double>& v = p.at(name);
    tensors.push_back(
        encoder_kit::f32_tensor(prefix + name, shape, std::vector<float>(v.begin(), v.end())));
  }
  encoder_kit::write_safetensors(file, tensors);
}

std::vector<double> forward(const Config& c, const Params& p,
                            const std::vector<std::vector<uint8_t>>& tiles) {
  const int64_t d = c.hidden, g = c.grid(), ps = c.patch, seq = g * g + 1;
  auto w = [&](const std::string& n) -> const Mat& { return p.at(n); };
  const Mat& conv = w("vision_tower.embeddings.patch_embeddings.projection.weight");
  const Mat& conv_b = w("vision_tower.embeddings.patch_embeddings.projection.bias");
  const Mat& pos = w("vision_tower.embeddings.position_embeddings");
  const Mat& cls = w("vision_tower.embeddings.cls_token");
  std::vector<double> result;
  for (const std::vector<uint8_t>& rgb : tiles) {
    // embeddings = cat(cls, conv(pixel_values).flatten(2).transpose(1, 2)) + positions
    Mat x(static_cast<size_t>(seq * d));
    for (int64_t o = 0; o < d; ++o) x[o] = cls[o] + pos[o];
    for (int64_t gy = 0; gy < g; ++gy)
      for (int64_t gx = 0; gx < g; ++gx)
        for (int64_t o = 0; o < d; ++o) {
          double s = conv_b[o];
          for (int64_t ch = 0; ch < 3; ++ch)
            for (int64_t ky = 0; ky < ps; ++ky)
              for (int64_t kx = 0; kx < ps; ++kx) {
                const double v = rgb[((gy * ps + ky) * c.image + gx * ps + kx) * 3 + ch];
                s +=
                    (v / 255.0 - c.mean[ch]) / c.std[ch] * conv[((o * 3 + ch) * ps + ky) * ps + kx];
              }
          const int64_t t = 1 + gy * g + gx;
          x[t * d + o] = s + pos[t * d + o];
        }
    std::vector<Mat> hidden_states = {x};
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string l = "vision_tower.encoder.layer." + std::to_string(i) + ".";
      auto norm = [&](const Mat& in, const std::string& n) {
        return c.rms_norm ? rms_norm(in, seq, d, w(l + n + ".weight"), c.eps)
                          : layer_norm(in, seq, d, w(l + n + ".weight"), w(l + n + ".bias"), c.eps);
      };
      auto proj = [&](const Mat& in, const std::string& n) {
        const std::string a = l + "attention." + n;
        return linear(in, seq, d, w(a + ".weight"), c.attention_bias ? &w(a + ".bias") : nullptr,
                      d);
      };
      const Mat h = norm(x, "layernorm_before");
      Mat q = proj(h, "q_proj"), k = proj(h, "k_proj");
      const Mat v = proj(h, "v_proj");
      if (c.qk_norm) {
        q = rms_norm(q, seq, d, w(l + "attention.q_norm.weight"), 1e-6);
        k = rms_norm(k, seq, d, w(l + "attention.k_norm.weight"), 1e-6);
      }
      const Mat a = linear(ref64::attention(q, seq, k, v, seq, c.heads, c.hidden), seq, d,
                           w(l + "attention.projection_layer.weight"),
                           &w(l + "attention.projection_layer.bias"), d);
      for (int64_t r = 0; r < seq; ++r)
        for (int64_t e = 0; e < d; ++e) x[r * d + e] += w(l + "lambda_1")[e] * a[r * d + e];
      Mat m = linear(norm(x, "layernorm_after"), seq, d, w(l + "mlp.fc1.weight"),
                     &w(l + "mlp.fc1.bias"), c.inter);
      for (double& e : m) e = ref64::gelu_erf(e);
      m = linear(m, seq, c.inter, w(l + "mlp.fc2.weight"), &w(l + "mlp.fc2.bias"), d);
      for (int64_t r = 0; r < seq; ++r)
        for (int64_t e = 0; e < d; ++e) x[r * d + e] += w(l + "lambda_2")[e] * m[r * d + e];
      hidden_states.push_back(x);
    }
    Mat f;
    if (c.feature_layer == -1) {
      f = c.mean_pooling ? x
                         : layer_norm(x, seq, d, w("vision_tower.layernorm.weight"),
                                      w("vision_tower.layernorm.bias"), c.eps);
    } else {
      const int64_t n = static_cast<int64_t>(hidden_states.size());
      f = hidden_states[static_cast<size_t>(c.feature_layer >= 0 ? c.feature_layer
                                                                 : n + c.feature_layer)];
    }
    // vision_features[:, 1:] reshaped to (B, W=g, H=g, C); with sf = 1/s:
    //   v1 = view(B, W, H sf, C / sf); v2 = v1.permute(0, 2, 1, 3);
    //   v3 = v2.view(B, H sf, W sf, C / sf^2); out = v3.permute(0, 2, 1, 3).
    const int64_t s = c.shuffle, hs = g / s, C = d;
    auto feat = [&](int64_t i0, int64_t i1, int64_t ch) {  // [W, H, C]
      return f[(1 + i0 * g + i1) * d + ch];
    };
    auto v1 = [&](int64_t a, int64_t b, int64_t ch) {  // [g, g/s, sC]: flat view of feat
      const int64_t flat = (a * hs + b) * (s * C) + ch;
      return feat(flat / (g * C), (flat / C) % g, flat % C);
    };
    auto v2 = [&](int64_t a, int64_t b, int64_t ch) { return v1(b, a, ch); };  // [g/s, g, sC]
    auto v3 = [&](int64_t a, int64_t b, int64_t ch) {  // [g/s, g/s, s^2 C]: flat view of v2
      const int64_t flat = (a * hs + b) * (s * s * C) + ch;
      return v2(flat / (g * s * C), (flat / (s * C)) % g, flat % (s * C));
    };
    const int64_t sw = s * s * C, rows = hs * hs;
    Mat shuffled(static_cast<size_t>(rows * sw));
    for (int64_t a = 0; a < hs; ++a)
      for (int64_t b = 0; b < hs; ++b)
        for (int64_t ch = 0; ch < sw; ++ch) shuffled[(a * hs + b) * sw + ch] = v3(b, a, ch);
    const Mat n = layer_norm(shuffled, rows, sw, w("multi_modal_projector.layer_norm.weight"),
                             w("multi_modal_projector.layer_norm.bias"), 1e-5);
    Mat h1 = linear(n, rows, sw, w("multi_modal_projector.linear_1.weight"),
                    &w("multi_modal_projector.linear_1.bias"), c.text);
    for (double& e : h1) e = ref64::gelu_erf(e);
    const Mat out = linear(h1, rows, c.text, w("multi_modal_projector.linear_2.weight"),
                           &w("multi_modal_projector.linear_2.bias"), c.text);
    result.insert(result.end(), out.begin(), out.end());
  }
  return result;
}

}  // namespace internvl_ref
