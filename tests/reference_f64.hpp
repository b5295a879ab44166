// The blocks the float64 model references of the tests share (siglip,
// internvl, deepseek_ocr2, qwen2_5_vl): written as directly as the PyTorch
// modules read, row-major, no blocking or fusion, so that a plugin's kernels
// are checked against arithmetic that has nothing in common with them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ref64 {

using Mat = std::vector<double>;  // row-major

// y[n, out] = x[n, in] * W^T (+ b when given); W is [out, in] as nn.Linear's.
inline Mat linear(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat* b, int64_t out) {
  Mat y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) s += x[r * in + k] * w[o * in + k];
      y[r * out + o] = s;
    }
  return y;
}

// nn.LayerNorm over the last `d` of n rows (biased variance).
inline Mat layer_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, const Mat& b, double eps) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < d; ++k) mean += x[r * d + k];
    mean /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k) var += (x[r * d + k] - mean) * (x[r * d + k] - mean);
    var /= static_cast<double>(d);
    for (int64_t k = 0; k < d; ++k)
      y[r * d + k] = (x[r * d + k] - mean) / std::sqrt(var + eps) * w[k] + b[k];
  }
  return y;
}

// RMSNorm: x / sqrt(mean(x^2) + eps) * w.
inline Mat rms_norm(const Mat& x, int64_t n, int64_t d, const Mat& w, double eps) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t k = 0; k < d; ++k) ss += x[r * d + k] * x[r * d + k];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (int64_t k = 0; k < d; ++k) y[r * d + k] = x[r * d + k] * inv * w[k];
  }
  return y;
}

// GELU as erf (nn.GELU()) and its tanh approximation (gelu_pytorch_tanh).
inline double gelu_erf(double v) {
  return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
}
inline double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

// Full softmax attention of nq queries over nk keys, `heads` heads side by
// side in rows of `hidden` (q [nq, hidden], k and v [nk, hidden]), scaled by
// 1/sqrt(head_dim); the result [nq, hidden].
inline Mat attention(const Mat& q, int64_t nq, const Mat& k, const Mat& v, int64_t nk,
                     int64_t heads, int64_t hidden) {
  const int64_t d = hidden, hd = hidden / heads;
  Mat out(static_cast<size_t>(nq * d), 0.0);
  std::vector<double> s(static_cast<size_t>(nk));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < nq; ++i) {
      double m = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e) dot += q[i * d + h * hd + e] * k[j * d + h * hd + e];
        s[j] = dot / std::sqrt(static_cast<double>(hd));
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j) sum += (s[j] = std::exp(s[j] - m));
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t e = 0; e < hd; ++e)
          out[i * d + h * hd + e] += s[j] / sum * v[j * d + h * hd + e];
    }
  return out;
}

// a + b, elementwise (a residual).
inline Mat add(Mat a, const Mat& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// height x width x channels random bytes (an image already at the model's size).
inline std::vector<uint8_t> random_pixels(int64_t height, int64_t width, int64_t channels,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(height * width * channels));
  for (uint8_t& v : px) v = static_cast<uint8_t>(rng() & 0xffu);
  return px;
}

}  // namespace ref64
