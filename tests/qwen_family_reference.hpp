// The pieces the float64 references of the Qwen-family towers share
// (qwen2_5_vl, qwen3_vl, glm4v): the processor's patch permute, the 2-D
// rotary angles and their application to q and k, attention within
// cu_seqlens segments, and the random f32-representable parameters of a
// shape list. Written as directly as transformers reads, like
// reference_f64.hpp, which holds the plain blocks.
#pragma once

#include "reference_f64.hpp"

#include <encoder_kit/safetensors.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace qwen_family_ref {

using ref64::Mat;
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// The processor's patch rows [t*h*w, 3*tp*p*p] for `frames` HWC frames
// already sized to multiples of patch * merge: rescale, normalise by
// mean/stdv, time padding by the last frame, then
// view(gt, tp, C, gh/m, m, p, gw/m, m, p).permute(0, 3, 6, 4, 7, 2, 1, 5, 8).
inline Mat patch_rows(const std::vector<uint8_t>& pixels, int64_t frames, int64_t height,
                      int64_t width, int64_t tp, int64_t p, int64_t m, const double (&mean)[3],
                      const double (&stdv)[3]) {
  auto value = [&](int64_t f, int64_t ch, int64_t y, int64_t x) {
    const int64_t src = std::min(f, frames - 1);  // time padding repeats the last frame
    const uint8_t v = pixels[static_cast<size_t>(((src * height + y) * width + x) * 3 + ch)];
    return (static_cast<double>(v) / 255.0 - mean[ch]) / stdv[ch];
  };
  const int64_t gt = (frames + tp - 1) / tp, gh = height / p, gw = width / p;
  Mat rows;
  rows.reserve(static_cast<size_t>(gt * gh * gw * 3 * tp * p * p));
  for (int64_t a = 0; a < gt; ++a)
    for (int64_t d = 0; d < gh / m; ++d)
      for (int64_t g = 0; g < gw / m; ++g)
        for (int64_t e = 0; e < m; ++e)
          for (int64_t h = 0; h < m; ++h)
            for (int64_t ch = 0; ch < 3; ++ch)
              for (int64_t b = 0; b < tp; ++b)
                for (int64_t f = 0; f < p; ++f)
                  for (int64_t i = 0; i < p; ++i)
                    rows.push_back(value(a * tp + b, ch, (d * m + e) * p + f, (g * m + h) * p + i));
  return rows;
}

// rot_pos_emb's angles [n, hd] for (row, column) positions: emb =
// cat(angles, angles), angles = [row * inv_freq, col * inv_freq],
// inv_freq[i] = 10000^(-2i / (hd/2)).
inline Mat rotary_angles(const std::vector<std::pair<int64_t, int64_t>>& pos, int64_t hd) {
  const int64_t quarter = hd / 4;
  Mat angles(pos.size() * static_cast<size_t>(hd));
  for (size_t r = 0; r < pos.size(); ++r)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t part = 0; part < 2; ++part)
        for (int64_t i = 0; i < quarter; ++i) {
          const double inv = 1.0 / std::pow(10000.0, 2.0 * i / (hd / 2.0));
          const double at = part == 0 ? pos[r].first : pos[r].second;
          angles[r * hd + half * hd / 2 + part * quarter + i] = at * inv;
        }
  return angles;
}

// Rotary on q and k of qkv [n, 3*d] (heads of hd side by side):
// x*cos + rotate_half(x)*sin per head, angles [n, hd].
inline void apply_rotary(Mat& qkv, int64_t n, int64_t d, int64_t heads, const Mat& angles) {
  const int64_t hd = d / heads;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t head = 0; head < heads; ++head) {
        double* v = qkv.data() + r * 3 * d + part * d + head * hd;
        const std::vector<double> orig(v, v + hd);
        for (int64_t j = 0; j < hd; ++j) {
          const double rot = j < hd / 2 ? -orig[j + hd / 2] : orig[j - hd / 2];
          const double angle = angles[r * hd + j];
          v[j] = orig[j] * std::cos(angle) + rot * std::sin(angle);
        }
      }
}

// Softmax attention of qkv [n, 3*d] within each segment [cu[s], cu[s+1])
// (cu_seqlens), scaled by 1/sqrt(hd); the result [n, d].
inline Mat segment_attention(const Mat& qkv, int64_t n, int64_t d, int64_t heads,
                             const std::vector<int64_t>& cu) {
  const int64_t hd = d / heads;
  Mat attn(static_cast<size_t>(n * d), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int64_t head = 0; head < heads; ++head)
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
  return attn;
}

// Random parameters of `shapes` under `prefix`, f32-representable: norm
// weights about 1, biases and norms narrow, the position table (is_pos)
// wide, other weights 1/sqrt(fan_in).
inline std::map<std::string, Mat> random_params(
    const Shapes& shapes, uint64_t seed, const std::string& prefix,
    const std::function<bool(const std::string&)>& is_pos) {
  std::mt19937_64 rng(seed);
  std::map<std::string, Mat> p;
  for (const auto& [name, shape] : shapes) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const int64_t fan_in = shape.size() >= 2 ? count / shape[0] : 1;
    const bool norm = name.find("norm") != std::string::npos;
    const bool bias = name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    const bool pos = is_pos(name);
    const double mean = norm && !bias ? 1.0 : 0.0;
    const double stdv = pos ? 0.5 : norm ? 0.2 : bias ? 0.1 : 1.0 / std::sqrt(double(fan_in));
    std::normal_distribution<double> dist(mean, stdv);
    Mat v(static_cast<size_t>(count));
    for (double& x : v) x = static_cast<double>(static_cast<float>(dist(rng)));
    p[prefix + name] = std::move(v);
  }
  return p;
}

// `shapes` under `prefix` as f32 safetensors, plus one tensor of the
// language model, which the plugin must ignore.
inline void write_params(const Shapes& shapes, const std::map<std::string, Mat>& p,
                         const std::filesystem::path& file, const std::string& prefix) {
  std::vector<encoder_kit::TensorToWrite> out;
  for (const auto& [name, shape] : shapes) {
    const Mat& v = p.at(prefix + name);
    out.push_back(
        encoder_kit::f32_tensor(prefix + name, shape, std::vector<float>(v.begin(), v.end())));
  }
  out.push_back(encoder_kit::f32_tensor("model.language_model.norm.weight", {4}, {1, 1, 1, 1}));
  encoder_kit::write_safetensors(file, out);
}

}  // namespace qwen_family_ref
