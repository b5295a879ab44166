#include "glm4v_reference.hpp"

#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <random>

namespace glm4v_ref {
namespace {

using Mat = std::vector<double>;  // row-major

// y[n, out] = x[n, in] * W^T (+ b)
Mat linear(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat* b, int64_t out) {
  Mat y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) s += x[r * in + k] * w[o * in + k];
      y[r * out + o] = s;
    }
  return y;
}

Mat rms_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, double eps) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t k = 0; k < d; ++k) ms += x[r * d + k] * x[r * d + k];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(d) + eps);
    for (int64_t k = 0; k < d; ++k) y[r * d + k] = x[r * d + k] * inv * w[k];
  }
  return y;
}

Mat layer_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, const Mat& b) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < d; ++k) mean += x[r * d + k];
    mean /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k) var += (x[r * d + k] - mean) * (x[r * d + k] - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + 1e-5);  // nn.LayerNorm's default eps
    for (int64_t k = 0; k < d; ++k) y[r * d + k] = (x[r * d + k] - mean) * inv * w[k] + b[k];
  }
  return y;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
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
  std::mt19937_64 rng(seed);
  Params p;
  for (const auto& [name, shape] : shapes(c)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const int64_t fan_in = shape.size() >= 2 ? count / shape[0] : 1;
    const bool norm = name.find("norm") != std::string::npos;
    const bool bias = name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    const bool pos = name.find("position_embedding") != std::string::npos;
    const double mean = norm && !bias ? 1.0 : 0.0;
    const double stdv = pos ? 0.5 : norm ? 0.2 : bias ? 0.1 : 1.0 / std::sqrt(double(fan_in));
    std::normal_distribution<double> dist(mean, stdv);
    Mat v(static_cast<size_t>(count));
    for (double& x : v) x = static_cast<double>(static_cast<float>(dist(rng)));
    p[prefix + name] = std::move(v);
  }
  return p;
}

void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix) {
  std::vector<encoder_kit::TensorToWrite> out;
  for (const auto& [name, shape] : shapes(c)) {
    const Mat& v = p.at(prefix + name);
    out.push_back(
        encoder_kit::f32_tensor(prefix + name, shape, std::vector<float>(v.begin(), v.end())));
  }
  // A tensor of the language model, which the plugin must ignore.
  out.push_back(encoder_kit::f32_tensor("model.language_model.norm.weight", {4}, {1, 1, 1, 1}));
  encoder_kit::write_safetensors(file, out);
}

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(frames * height * width * 3));
  for (auto& v : px) v = static_cast<uint8_t>(rng() & 0xff);
  return px;
}

Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width) {
  const double mean[3] = {0.48145466, 0.4578275, 0.40821073};
  const double stdv[3] = {0.26862954, 0.26130258, 0.27577711};
  const int64_t tp = c.temporal, p = c.patch, m = c.merge;
  const int64_t padded = (frames + tp - 1) / tp * tp;
  auto value = [&](int64_t f, int64_t ch, int64_t y, int64_t x) {
    const int64_t src = std::min(f, frames - 1);  // time padding repeats the last frame
    const uint8_t v = pixels[static_cast<size_t>(((src * height + y) * width + x) * 3 + ch)];
    return (static_cast<double>(v) / 255.0 - mean[ch]) / stdv[ch];
  };
  Input in{padded / tp, height / p, width / p, {}};
  // view(gt, tp, C, gh/m, m, p, gw/m, m, p).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
  const int64_t gt = in.t, gh = in.h, gw = in.w;
  for (int64_t a = 0; a < gt; ++a)
    for (int64_t d = 0; d < gh / m; ++d)
      for (int64_t g = 0; g < gw / m; ++g)
        for (int64_t e = 0; e < m; ++e)
          for (int64_t h = 0; h < m; ++h)
            for (int64_t ch = 0; ch < 3; ++ch)
              for (int64_t b = 0; b < tp; ++b)
                for (int64_t f = 0; f < p; ++f)
                  for (int64_t i = 0; i < p; ++i)
                    in.rows.push_back(
                        value(a * tp + b, ch, (d * m + e) * p + f, (g * m + h) * p + i));
  return in;
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
  // cos/sin [n, hd]: emb = cat(angles, angles), angles = [row * inv_freq, col * inv_freq].
  const int64_t quarter = hd / 4;
  Mat cos_t(static_cast<size_t>(n * hd)), sin_t(cos_t.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t part = 0; part < 2; ++part)
        for (int64_t i = 0; i < quarter; ++i) {
          const double inv = 1.0 / std::pow(10000.0, 2.0 * i / (hd / 2.0));
          const double pos = part == 0 ? pos_ids[r].first : pos_ids[r].second;
          cos_t[r * hd + half * hd / 2 + part * quarter + i] = std::cos(pos * inv);
          sin_t[r * hd + half * hd / 2 + part * quarter + i] = std::sin(pos * inv);
        }

  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    Mat h = rms_norm(x, n, d, W.at(p + "norm1.weight"), c.eps);
    Mat qkv = linear(h, n, d, W.at(p + "attn.qkv.weight"),
                     c.attention_bias ? &W.at(p + "attn.qkv.bias") : nullptr, 3 * d);
    // Rotary on q and k: x*cos + rotate_half(x)*sin per head.
    for (int64_t r = 0; r < n; ++r)
      for (int64_t part = 0; part < 2; ++part)
        for (int64_t head = 0; head < c.heads; ++head) {
          double* v = qkv.data() + r * 3 * d + part * d + head * hd;
          std::vector<double> orig(v, v + hd);
          for (int64_t j = 0; j < hd; ++j) {
            const double rot = j < hd / 2 ? -orig[j + hd / 2] : orig[j - hd / 2];
            v[j] = orig[j] * cos_t[r * hd + j] + rot * sin_t[r * hd + j];
          }
        }
    Mat attn(static_cast<size_t>(n * d), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (int64_t head = 0; head < c.heads; ++head)
        for (int64_t qi = cu[s]; qi < cu[s + 1]; ++qi) {
          std::vector<double> sc;
          double mx = -1e300;
          for (int64_t ki = cu[s]; ki < cu[s + 1]; ++ki) {
            double dot = 0;
            for (int64_t j = 0; j < hd; ++j)
              dot += qkv[qi * 3 * d + head * hd + j] * qkv[ki * 3 * d + d + head * hd + j];
            sc.push_back(dot * scale);
            mx = std::max(mx, sc.back());
          }
          double sum = 0;
          for (double& v : sc) sum += (v = std::exp(v - mx));
          for (int64_t ki = cu[s]; ki < cu[s + 1]; ++ki)
            for (int64_t j = 0; j < hd; ++j)
              attn[qi * d + head * hd + j] +=
                  sc[ki - cu[s]] / sum * qkv[ki * 3 * d + 2 * d + head * hd + j];
        }
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
  hm = layer_norm(hm, tokens, c.out, W.at("merger.post_projection_norm.weight"),
                  W.at("merger.post_projection_norm.bias"));
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
