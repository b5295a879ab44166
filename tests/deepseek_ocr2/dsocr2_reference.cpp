#include "dsocr2_reference.hpp"

#include "../reference_f64.hpp"

#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace dsocr2_ref {
namespace {

using ref64::linear;
using ref64::Mat;

constexpr double kEps = 1e-6;  // every LayerNorm and RMSNorm of the vision side

Mat layer_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, const Mat& b) {
  return ref64::layer_norm(x, n, d, w, b, kEps);
}

Mat rms_norm(const Mat& x, int64_t n, int64_t d, const Mat& w) {
  return ref64::rms_norm(x, n, d, w, kEps);
}

// nn.Conv2d on a channels-last [h, w, cin] map, weight [cout, cin, k, k].
Mat conv2d(const Mat& x, int64_t h, int64_t w, int64_t cin, const Mat& weight, const Mat* bias,
           int64_t cout, int64_t k, int64_t stride, int64_t pad, int64_t& ho, int64_t& wo) {
  ho = (h + 2 * pad - k) / stride + 1;
  wo = (w + 2 * pad - k) / stride + 1;
  Mat y(static_cast<size_t>(ho * wo * cout));
  for (int64_t oy = 0; oy < ho; ++oy)
    for (int64_t ox = 0; ox < wo; ++ox)
      for (int64_t o = 0; o < cout; ++o) {
        double s = bias ? (*bias)[o] : 0.0;
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              s += x[(iy * w + ix) * cin + c] * weight[((o * cin + c) * k + ky) * k + kx];
            }
        y[(oy * wo + ox) * cout + o] = s;
      }
  return y;
}

// PyTorch's antialiased bicubic (a = -0.5), align_corners=False: [out, in] weights.
Mat bicubic_aa_weights(int64_t in, int64_t out) {
  auto cubic = [](double x) {
    const double a = -0.5;
    x = std::fabs(x);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
  };
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  Mat wts(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0;
    for (int64_t j = lo; j < hi; ++j)
      total += cubic((static_cast<double>(j) - center + 0.5) * invscale);
    for (int64_t j = lo; j < hi; ++j)
      wts[i * in + j] = cubic((static_cast<double>(j) - center + 0.5) * invscale) / total;
  }
  return wts;
}

// get_rel_pos's F.interpolate(mode="linear") of a [len, hd] table to `out` rows.
Mat resize_linear(const Mat& t, int64_t len, int64_t hd, int64_t out) {
  Mat y(static_cast<size_t>(out * hd));
  const double scale = static_cast<double>(len) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    const double src = std::max(scale * (static_cast<double>(i) + 0.5) - 0.5, 0.0);
    const int64_t i0 = static_cast<int64_t>(src);
    const int64_t i1 = i0 + (i0 < len - 1 ? 1 : 0);
    const double l = src - static_cast<double>(i0);
    for (int64_t c = 0; c < hd; ++c) y[i * hd + c] = (1 - l) * t[i0 * hd + c] + l * t[i1 * hd + c];
  }
  return y;
}

std::string sam(const std::string& s) {
  return "model.sam_model." + s;
}
std::string enc(const std::string& s) {
  return "model.qwen2_model.model.model." + s;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> shapes(const Config& c) {
  const int64_t d = c.sam_hidden, hd = c.sam_hidden / c.sam_heads, g = c.sam_image / c.patch;
  const int64_t e = c.enc_hidden, ehd = c.enc_hidden / c.enc_heads;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {sam("patch_embed.proj.weight"), {d, 3, c.patch, c.patch}},
      {sam("patch_embed.proj.bias"), {d}},
      {sam("pos_embed"), {1, g, g, d}}};
  for (int64_t i = 0; i < c.sam_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const bool global =
        std::find(c.global_layers.begin(), c.global_layers.end(), i) != c.global_layers.end();
    const int64_t rel = 2 * (global ? g : c.window) - 1;
    for (const char* n : {"norm1", "norm2"}) {
      s.push_back({sam(p + n + ".weight"), {d}});
      s.push_back({sam(p + n + ".bias"), {d}});
    }
    s.push_back({sam(p + "attn.qkv.weight"), {3 * d, d}});
    s.push_back({sam(p + "attn.qkv.bias"), {3 * d}});
    s.push_back({sam(p + "attn.proj.weight"), {d, d}});
    s.push_back({sam(p + "attn.proj.bias"), {d}});
    s.push_back({sam(p + "attn.rel_pos_h"), {rel, hd}});
    s.push_back({sam(p + "attn.rel_pos_w"), {rel, hd}});
    s.push_back({sam(p + "mlp.lin1.weight"), {c.sam_mlp, d}});
    s.push_back({sam(p + "mlp.lin1.bias"), {c.sam_mlp}});
    s.push_back({sam(p + "mlp.lin2.weight"), {d, c.sam_mlp}});
    s.push_back({sam(p + "mlp.lin2.bias"), {d}});
  }
  s.push_back({sam("neck.0.weight"), {c.neck, d, 1, 1}});
  s.push_back({sam("neck.1.weight"), {c.neck}});
  s.push_back({sam("neck.1.bias"), {c.neck}});
  s.push_back({sam("neck.2.weight"), {c.neck, c.neck, 3, 3}});
  s.push_back({sam("neck.3.weight"), {c.neck}});
  s.push_back({sam("neck.3.bias"), {c.neck}});
  s.push_back({sam("net_2.weight"), {c.down1, c.neck, 3, 3}});
  s.push_back({sam("net_3.weight"), {e, c.down1, 3, 3}});
  for (int64_t i = 0; i < c.enc_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    s.push_back({enc(p + "input_layernorm.weight"), {e}});
    s.push_back({enc(p + "post_attention_layernorm.weight"), {e}});
    s.push_back({enc(p + "self_attn.q_proj.weight"), {c.enc_heads * ehd, e}});
    s.push_back({enc(p + "self_attn.q_proj.bias"), {c.enc_heads * ehd}});
    for (const char* n : {"k_proj", "v_proj"}) {
      s.push_back({enc(p + "self_attn." + n + ".weight"), {c.enc_kv_heads * ehd, e}});
      s.push_back({enc(p + "self_attn." + n + ".bias"), {c.enc_kv_heads * ehd}});
    }
    s.push_back({enc(p + "self_attn.o_proj.weight"), {e, c.enc_heads * ehd}});
    s.push_back({enc(p + "mlp.gate_proj.weight"), {c.enc_inter, e}});
    s.push_back({enc(p + "mlp.up_proj.weight"), {c.enc_inter, e}});
    s.push_back({enc(p + "mlp.down_proj.weight"), {e, c.enc_inter}});
  }
  s.push_back({enc("norm.weight"), {e}});
  s.push_back({"model.qwen2_model.query_768.weight", {c.view_tokens(c.tile), e}});
  s.push_back({"model.qwen2_model.query_1024.weight", {c.view_tokens(c.global_size), e}});
  s.push_back({"model.projector.layers.weight", {c.text_hidden, e}});
  s.push_back({"model.projector.layers.bias", {c.text_hidden}});
  s.push_back({"model.view_seperator", {c.text_hidden}});
  return s;
}

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// The release name's transformers spelling (docs/models/deepseek_ocr2.md table).
std::string transformers_name(std::string n, const std::string& prefix) {
  auto swap = [&](const std::string& from, const std::string& to) {
    const size_t at = n.find(from);
    if (at == std::string::npos) return false;
    n = n.substr(0, at) + to + n.substr(at + from.size());
    return true;
  };
  if (swap("model.qwen2_model.model.model.", "vision_tower.vision_encoder.") ||
      swap("model.qwen2_model.query_768", "vision_tower.query_768_resolution") ||
      swap("model.qwen2_model.query_1024", "vision_tower.query_1024_resolution") ||
      swap("model.projector.layers.", "multi_modal_projector.") ||
      swap("model.view_seperator", "view_separator"))
    return prefix + n;
  swap("model.sam_model.", "vision_tower.sam_encoder.");
  swap("patch_embed.proj.", "patch_embed.projection.");
  swap(".blocks.", ".layers.");
  swap(".norm1.", ".layer_norm1.");
  swap(".norm2.", ".layer_norm2.");
  swap("neck.0.", "neck.conv1.");
  swap("neck.1.", "neck.layer_norm1.");
  swap("neck.2.", "neck.conv2.");
  swap("neck.3.", "neck.layer_norm2.");
  swap("net_2.", "proj.conv1.");
  swap("net_3.", "proj.conv2.");
  return prefix + n;
}

double f32(double v) {
  return static_cast<double>(static_cast<float>(v));
}

}  // namespace

int64_t Config::view_tokens(int64_t side) const {
  const int64_t g = side / patch, g2 = (g + 1) / 2, g4 = (g2 + 1) / 2;
  return g4 * g4;
}

std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  return {{"patch_size", std::to_string(c.patch)},
          {"sam_image_size", std::to_string(c.sam_image)},
          {"sam_hidden_size", std::to_string(c.sam_hidden)},
          {"sam_layers", std::to_string(c.sam_layers)},
          {"sam_heads", std::to_string(c.sam_heads)},
          {"sam_mlp_dim", std::to_string(c.sam_mlp)},
          {"window_size", std::to_string(c.window)},
          {"global_attn_indexes", list(c.global_layers)},
          {"neck_channels", std::to_string(c.neck)},
          {"downsample_channels", list({c.down1, c.enc_hidden})},
          {"encoder_layers", std::to_string(c.enc_layers)},
          {"encoder_heads", std::to_string(c.enc_heads)},
          {"encoder_kv_heads", std::to_string(c.enc_kv_heads)},
          {"encoder_intermediate_size", std::to_string(c.enc_inter)},
          {"rope_theta", std::to_string(c.rope_theta)},
          {"text_hidden_size", std::to_string(c.text_hidden)},
          {"global_size", std::to_string(c.global_size)},
          {"tile_size", std::to_string(c.tile)},
          {"min_crops", std::to_string(c.min_crops)},
          {"max_crops", std::to_string(c.max_crops)}};
}

Params random_params(const Config& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  Params p;
  for (const auto& [name, shape] : shapes(c)) {
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    const int64_t fan_in = shape.size() >= 2 ? count / shape[0] : 1;
    double mean = 0, std = 0.02;
    if (ends_with(name, "norm.weight") || ends_with(name, "layernorm.weight") ||
        name.find(".norm1.weight") != std::string::npos ||
        name.find(".norm2.weight") != std::string::npos || ends_with(name, "neck.1.weight") ||
        ends_with(name, "neck.3.weight")) {
      mean = 1.0;
      std = 0.1;
    } else if (ends_with(name, ".bias") && shape.size() == 1) {
      std = name.find("norm") != std::string::npos || name.find("neck") != std::string::npos ? 0.1
                                                                                             : 0.02;
    } else if (name.find("rel_pos") != std::string::npos || ends_with(name, "pos_embed")) {
      std = 0.5;
    } else if (name.find("query_") != std::string::npos || ends_with(name, "view_seperator")) {
      std = 1.0;
    } else {
      std = 1.0 / std::sqrt(static_cast<double>(fan_in));
    }
    std::vector<double> v(static_cast<size_t>(count));
    for (double& x : v) x = f32(mean + std * n01(rng));
    p[name] = std::move(v);
  }
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  bool transformers, const std::string& prefix) {
  std::vector<encoder_kit::TensorToWrite> out;
  for (const auto& [name, shape] : shapes(c)) {
    const Mat& v = p.at(name);
    out.push_back(encoder_kit::f32_tensor(transformers ? transformers_name(name, prefix) : name,
                                          shape, std::vector<float>(v.begin(), v.end())));
  }
  // Tensors of the language model, which the plugin must ignore.
  out.push_back(
      encoder_kit::f32_tensor("model.layers.0.input_layernorm.weight", {4}, {1, 1, 1, 1}));
  out.push_back(encoder_kit::f32_tensor("lm_head.weight", {2, 2}, {1, 0, 0, 1}));
  encoder_kit::write_safetensors(file, out);
}

std::pair<int64_t, int64_t> crop_grid(const Config& c, int64_t height, int64_t width) {
  if (std::max(height, width) <= c.tile) return {0, 0};
  // get_all_supported_aspect_ratios: cols outer, rows inner, stable sort by area.
  std::vector<std::pair<int64_t, int64_t>> cand;
  for (int64_t w = 1; w <= c.max_crops; ++w)
    for (int64_t h = 1; h <= c.max_crops; ++h)
      if (w * h >= c.min_crops && w * h <= c.max_crops) cand.push_back({w, h});
  std::stable_sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) {
    return a.first * a.second < b.first * b.second;
  });
  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double area = static_cast<double>(width * height);
  double best_diff = std::numeric_limits<double>::infinity();
  std::pair<int64_t, int64_t> best = {1, 1};
  for (const auto& g : cand) {
    const double diff =
        std::fabs(aspect - static_cast<double>(g.first) / static_cast<double>(g.second));
    if (diff < best_diff) {
      best_diff = diff;
      best = g;
    } else if (diff == best_diff &&
               area > 0.5 * static_cast<double>(c.tile * c.tile * g.first * g.second)) {
      best = g;
    }
  }
  return best;
}

Views preprocess(const Config& c, const std::vector<uint8_t>& rgb, int64_t height, int64_t width) {
  using encoder_kit::image::Filter;
  auto normalise = [](uint8_t v) { return (static_cast<double>(v) / 255.0 - 0.5) / 0.5; };
  Views v;
  // Global view: long side to global_size (round half to even), centred pad with 127.
  const double scale =
      static_cast<double>(c.global_size) / static_cast<double>(std::max(height, width));
  const int64_t nh = static_cast<int64_t>(std::nearbyint(static_cast<double>(height) * scale));
  const int64_t nw = static_cast<int64_t>(std::nearbyint(static_cast<double>(width) * scale));
  const std::vector<uint8_t> r =
      encoder_kit::image::resize(rgb.data(), height, width, 3, nh, nw, Filter::Bicubic);
  const int64_t side = std::max(nh, nw);
  if (side != c.global_size) throw std::runtime_error("global view is not global_size");
  const int64_t left = (side - nw) / 2, top = (side - nh) / 2;
  v.global.assign(static_cast<size_t>(3 * side * side), normalise(127));
  for (int64_t y = 0; y < nh; ++y)
    for (int64_t x = 0; x < nw; ++x)
      for (int64_t ch = 0; ch < 3; ++ch)
        v.global[(ch * side + y + top) * side + x + left] = normalise(r[(y * nw + x) * 3 + ch]);
  // Local crops: the whole image resized to the grid, cut row-major.
  const auto [cols, rows] = crop_grid(c, height, width);
  if (cols == 0) return v;
  const int64_t th = c.tile * rows, tw = c.tile * cols;
  const std::vector<uint8_t> big =
      encoder_kit::image::resize(rgb.data(), height, width, 3, th, tw, Filter::Bicubic);
  for (int64_t i = 0; i < cols * rows; ++i) {
    const int64_t row = i / cols, col = i % cols;
    std::vector<double> crop(static_cast<size_t>(3 * c.tile * c.tile));
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < c.tile; ++y)
        for (int64_t x = 0; x < c.tile; ++x)
          crop[(ch * c.tile + y) * c.tile + x] =
              normalise(big[((row * c.tile + y) * tw + col * c.tile + x) * 3 + ch]);
    v.crops.push_back(std::move(crop));
  }
  return v;
}

std::vector<double> encode_view(const Config& c, const Params& P, const std::vector<double>& px,
                                int64_t side) {
  auto W = [&](const std::string& n) -> const Mat& { return P.at(n); };
  const int64_t d = c.sam_hidden, heads = c.sam_heads, hd = d / heads, p = c.patch;
  const int64_t g = side / p, G = c.sam_image / p;
  // patch embedding: Conv2d(3, d, p, p) on the CHW view
  Mat x(static_cast<size_t>(g * g * d));
  for (int64_t y = 0; y < g; ++y)
    for (int64_t xx = 0; xx < g; ++xx)
      for (int64_t o = 0; o < d; ++o) {
        double s = W(sam("patch_embed.proj.bias"))[o];
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t ky = 0; ky < p; ++ky)
            for (int64_t kx = 0; kx < p; ++kx)
              s += W(sam("patch_embed.proj.weight"))[((o * 3 + ch) * p + ky) * p + kx] *
                   px[(ch * side + y * p + ky) * side + xx * p + kx];
        x[(y * g + xx) * d + o] = s;
      }
  // absolute positions, interpolated when the grid differs
  const Mat& pos = W(sam("pos_embed"));
  const Mat wi = bicubic_aa_weights(G, g);
  for (int64_t y = 0; y < g; ++y)
    for (int64_t xx = 0; xx < g; ++xx)
      for (int64_t k = 0; k < d; ++k) {
        double s = 0;
        if (g == G) {
          s = pos[(y * G + xx) * d + k];
        } else {
          for (int64_t i = 0; i < G; ++i)
            for (int64_t j = 0; j < G; ++j)
              s += wi[y * G + i] * wi[xx * G + j] * pos[(i * G + j) * d + k];
        }
        x[(y * g + xx) * d + k] += s;
      }
  // blocks
  for (int64_t l = 0; l < c.sam_layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    const bool global =
        std::find(c.global_layers.begin(), c.global_layers.end(), l) != c.global_layers.end();
    const int64_t win = global ? g : c.window;
    const int64_t padded = (g + win - 1) / win * win;
    const Mat h = layer_norm(x, g * g, d, W(sam(b + "norm1.weight")), W(sam(b + "norm1.bias")));
    const int64_t table = 2 * (global ? G : c.window) - 1;
    const Mat rh = resize_linear(W(sam(b + "attn.rel_pos_h")), table, hd, 2 * win - 1);
    const Mat rw = resize_linear(W(sam(b + "attn.rel_pos_w")), table, hd, 2 * win - 1);
    Mat attn(static_cast<size_t>(g * g * d), 0.0);
    const int64_t n = win * win;
    for (int64_t wy = 0; wy < padded / win; ++wy)
      for (int64_t wx = 0; wx < padded / win; ++wx) {
        // the window's tokens; positions past the map are zero (F.pad)
        Mat t(static_cast<size_t>(n * d), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t y = wy * win + i / win, xx = wx * win + i % win;
          if (y < g && xx < g)
            for (int64_t k = 0; k < d; ++k) t[i * d + k] = h[(y * g + xx) * d + k];
        }
        const Mat qkv =
            linear(t, n, d, W(sam(b + "attn.qkv.weight")), &W(sam(b + "attn.qkv.bias")), 3 * d);
        Mat o(static_cast<size_t>(n * d), 0.0);
        for (int64_t hh = 0; hh < heads; ++hh) {
          auto q = [&](int64_t i, int64_t k) { return qkv[i * 3 * d + hh * hd + k]; };
          auto kk = [&](int64_t i, int64_t k) { return qkv[i * 3 * d + d + hh * hd + k]; };
          auto vv = [&](int64_t i, int64_t k) { return qkv[i * 3 * d + 2 * d + hh * hd + k]; };
          for (int64_t i = 0; i < n; ++i) {
            std::vector<double> s(static_cast<size_t>(n));
            double mx = -1e300;
            for (int64_t j = 0; j < n; ++j) {
              const int64_t dy = i / win - j / win + win - 1, dx = i % win - j % win + win - 1;
              double dot = 0, bh = 0, bw = 0;
              for (int64_t k = 0; k < hd; ++k) {
                dot += q(i, k) * kk(j, k);
                bh += q(i, k) * rh[dy * hd + k];
                bw += q(i, k) * rw[dx * hd + k];
              }
              s[j] = dot / std::sqrt(static_cast<double>(hd)) + bh + bw;
              mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (double& e : s) sum += (e = std::exp(e - mx));
            for (int64_t j = 0; j < n; ++j)
              for (int64_t k = 0; k < hd; ++k) o[i * d + hh * hd + k] += s[j] / sum * vv(j, k);
          }
        }
        const Mat pr =
            linear(o, n, d, W(sam(b + "attn.proj.weight")), &W(sam(b + "attn.proj.bias")), d);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t y = wy * win + i / win, xx = wx * win + i % win;
          if (y < g && xx < g)
            for (int64_t k = 0; k < d; ++k) attn[(y * g + xx) * d + k] = pr[i * d + k];
        }
      }
    for (size_t k = 0; k < x.size(); ++k) x[k] += attn[k];
    const Mat h2 = layer_norm(x, g * g, d, W(sam(b + "norm2.weight")), W(sam(b + "norm2.bias")));
    Mat m = linear(h2, g * g, d, W(sam(b + "mlp.lin1.weight")), &W(sam(b + "mlp.lin1.bias")),
                   c.sam_mlp);
    for (double& e : m) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
    const Mat m2 =
        linear(m, g * g, c.sam_mlp, W(sam(b + "mlp.lin2.weight")), &W(sam(b + "mlp.lin2.bias")), d);
    for (size_t k = 0; k < x.size(); ++k) x[k] += m2[k];
  }
  // neck and downsampling
  int64_t h1, w1, h2, w2, h3, w3, h4, w4;
  Mat y = conv2d(x, g, g, d, W(sam("neck.0.weight")), nullptr, c.neck, 1, 1, 0, h1, w1);
  y = layer_norm(y, h1 * w1, c.neck, W(sam("neck.1.weight")), W(sam("neck.1.bias")));
  y = conv2d(y, h1, w1, c.neck, W(sam("neck.2.weight")), nullptr, c.neck, 3, 1, 1, h2, w2);
  y = layer_norm(y, h2 * w2, c.neck, W(sam("neck.3.weight")), W(sam("neck.3.bias")));
  y = conv2d(y, h2, w2, c.neck, W(sam("net_2.weight")), nullptr, c.down1, 3, 2, 1, h3, w3);
  y = conv2d(y, h3, w3, c.down1, W(sam("net_3.weight")), nullptr, c.enc_hidden, 3, 2, 1, h4, w4);
  // encoder: [image tokens | learned queries]
  const int64_t n = h4 * w4, L = 2 * n, e = c.enc_hidden, eh = c.enc_heads;
  const int64_t ehd = e / eh, kvh = c.enc_kv_heads;
  const Mat& queries = W(side == c.tile ? "model.qwen2_model.query_768.weight"
                                        : "model.qwen2_model.query_1024.weight");
  if (static_cast<int64_t>(queries.size()) != n * e) throw std::runtime_error("query bank size");
  Mat s(static_cast<size_t>(L * e));
  std::copy(y.begin(), y.end(), s.begin());
  std::copy(queries.begin(), queries.end(), s.begin() + n * e);
  auto rope = [&](Mat& t, int64_t nh) {
    for (int64_t i = 0; i < L; ++i)
      for (int64_t hh = 0; hh < nh; ++hh)
        for (int64_t j = 0; j < ehd / 2; ++j) {
          const double inv =
              std::pow(c.rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(ehd));
          const double a = static_cast<double>(i) * inv, co = std::cos(a), si = std::sin(a);
          double& x1 = t[i * nh * ehd + hh * ehd + j];
          double& x2 = t[i * nh * ehd + hh * ehd + j + ehd / 2];
          const double a1 = x1, a2 = x2;
          x1 = a1 * co - a2 * si;
          x2 = a2 * co + a1 * si;
        }
  };
  for (int64_t l = 0; l < c.enc_layers; ++l) {
    const std::string b = "layers." + std::to_string(l) + ".";
    const Mat hN = rms_norm(s, L, e, W(enc(b + "input_layernorm.weight")));
    Mat q = linear(hN, L, e, W(enc(b + "self_attn.q_proj.weight")),
                   &W(enc(b + "self_attn.q_proj.bias")), eh * ehd);
    Mat k = linear(hN, L, e, W(enc(b + "self_attn.k_proj.weight")),
                   &W(enc(b + "self_attn.k_proj.bias")), kvh * ehd);
    const Mat v = linear(hN, L, e, W(enc(b + "self_attn.v_proj.weight")),
                         &W(enc(b + "self_attn.v_proj.bias")), kvh * ehd);
    rope(q, eh);
    rope(k, kvh);
    Mat o(static_cast<size_t>(L * eh * ehd), 0.0);
    for (int64_t hh = 0; hh < eh; ++hh) {
      const int64_t kv = hh / (eh / kvh);
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc;
        std::vector<int64_t> idx;
        double mx = -1e300;
        for (int64_t j = 0; j < L; ++j) {
          if (!(j < n || j <= i)) continue;  // images see images; queries are causal
          double dot = 0;
          for (int64_t t = 0; t < ehd; ++t)
            dot += q[i * eh * ehd + hh * ehd + t] * k[j * kvh * ehd + kv * ehd + t];
          sc.push_back(dot / std::sqrt(static_cast<double>(ehd)));
          idx.push_back(j);
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        for (double& z : sc) sum += (z = std::exp(z - mx));
        for (size_t a = 0; a < sc.size(); ++a)
          for (int64_t t = 0; t < ehd; ++t)
            o[i * eh * ehd + hh * ehd + t] += sc[a] / sum * v[idx[a] * kvh * ehd + kv * ehd + t];
      }
    }
    const Mat op = linear(o, L, eh * ehd, W(enc(b + "self_attn.o_proj.weight")), nullptr, e);
    for (size_t z = 0; z < s.size(); ++z) s[z] += op[z];
    const Mat h2 = rms_norm(s, L, e, W(enc(b + "post_attention_layernorm.weight")));
    Mat gt = linear(h2, L, e, W(enc(b + "mlp.gate_proj.weight")), nullptr, c.enc_inter);
    const Mat up = linear(h2, L, e, W(enc(b + "mlp.up_proj.weight")), nullptr, c.enc_inter);
    for (size_t z = 0; z < gt.size(); ++z) gt[z] = gt[z] / (1.0 + std::exp(-gt[z])) * up[z];
    const Mat dn = linear(gt, L, c.enc_inter, W(enc(b + "mlp.down_proj.weight")), nullptr, e);
    for (size_t z = 0; z < s.size(); ++z) s[z] += dn[z];
  }
  const Mat fin = rms_norm(s, L, e, W(enc("norm.weight")));
  const Mat qrows(fin.begin() + n * e, fin.end());
  return linear(qrows, n, e, W("model.projector.layers.weight"), &W("model.projector.layers.bias"),
                c.text_hidden);
}

std::vector<double> image_features(const Config& c, const Params& p, const Views& v) {
  std::vector<double> out;
  for (const auto& crop : v.crops) {
    const auto f = encode_view(c, p, crop, c.tile);
    out.insert(out.end(), f.begin(), f.end());
  }
  const auto g = encode_view(c, p, v.global, c.global_size);
  out.insert(out.end(), g.begin(), g.end());
  const auto& sep = p.at("model.view_seperator");
  out.insert(out.end(), sep.begin(), sep.end());
  return out;
}

std::vector<uint8_t> random_pixels(int64_t height, int64_t width, uint64_t seed) {
  return ref64::random_pixels(height, width, 3, seed);
}

}  // namespace dsocr2_ref
