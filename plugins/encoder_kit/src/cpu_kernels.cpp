#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace encoder_kit::cpu {
namespace {
// Query rows per attention block: bounds the scores held at once to
// kQueryBlock x seqlen.
constexpr int64_t kQueryBlock = 64;
}  // namespace

void linear(const float* x, int64_t rows, int64_t in, const float* w, const float* bias,
            int64_t out, float* y, bool accumulate) {
  if (rows <= 0 || out <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
              static_cast<int>(out), static_cast<int>(in), 1.0f, x, static_cast<int>(in), w,
              static_cast<int>(in), accumulate ? 1.0f : 0.0f, y, static_cast<int>(out));
  if (!bias) return;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * out;
    for (int64_t c = 0; c < out; ++c) row[c] += bias[c];
  }
}

void rms_norm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    float* o = y + r * dim;
    double ss = 0.0;
    for (int64_t c = 0; c < dim; ++c) ss += static_cast<double>(in[c]) * in[c];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t c = 0; c < dim; ++c) o[c] = in[c] * inv * weight[c];
  }
}

void layer_norm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    float* o = y + r * dim;
    double mean = 0.0;
    for (int64_t c = 0; c < dim; ++c) mean += in[c];
    mean /= static_cast<double>(dim);
    double var = 0.0;
    for (int64_t c = 0; c < dim; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(dim);
    const float inv = 1.0f / std::sqrt(static_cast<float>(var) + eps);
    for (int64_t c = 0; c < dim; ++c)
      o[c] = (in[c] - static_cast<float>(mean)) * inv * weight[c] + (bias ? bias[c] : 0.0f);
  }
}

void gelu_erf(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

void gelu_tanh(float* x, size_t n) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

void silu(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void silu_mul(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rotary_half(float* x, int64_t rows, int64_t ld, int64_t heads, int64_t head_dim,
                 const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * ld + h * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j] + a * s[j];
      }
    }
  }
}

size_t attention_scratch_floats(int64_t max_seqlen) {
  return static_cast<size_t>(kQueryBlock) * static_cast<size_t>(std::max<int64_t>(max_seqlen, 1));
}

void varlen_attention(const float* q, const float* k, const float* v, int64_t ld_in, float* out,
                      int64_t ld_out, const int32_t* cu_seqlens, int64_t num_seqs, int64_t heads,
                      int64_t head_dim, float scale, float* scratch, size_t scratch_floats) {
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t start = cu_seqlens[s], len = cu_seqlens[s + 1] - cu_seqlens[s];
    if (len <= 0) continue;
    if (attention_scratch_floats(len) > scratch_floats)
      fail(EG_ERR_INTERNAL, "varlen_attention: sequence of " + std::to_string(len) +
                                " rows exceeds the scratch sized for " +
                                std::to_string(scratch_floats / kQueryBlock));
    for (int64_t h = 0; h < heads; ++h) {
      const float* kh = k + start * ld_in + h * head_dim;
      const float* vh = v + start * ld_in + h * head_dim;
      for (int64_t q0 = 0; q0 < len; q0 += kQueryBlock) {
        const int64_t nq = std::min(kQueryBlock, len - q0);
        const float* qh = q + (start + q0) * ld_in + h * head_dim;
        float* oh = out + (start + q0) * ld_out + h * head_dim;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq),
                    static_cast<int>(len), static_cast<int>(head_dim), scale, qh,
                    static_cast<int>(ld_in), kh, static_cast<int>(ld_in), 0.0f, scratch,
                    static_cast<int>(len));
        for (int64_t i = 0; i < nq; ++i) {
          float* row = scratch + i * len;
          const float m = *std::max_element(row, row + len);
          float sum = 0.0f;
          for (int64_t j = 0; j < len; ++j) {
            row[j] = std::exp(row[j] - m);
            sum += row[j];
          }
          const float inv = 1.0f / sum;
          for (int64_t j = 0; j < len; ++j) row[j] *= inv;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq),
                    static_cast<int>(head_dim), static_cast<int>(len), 1.0f, scratch,
                    static_cast<int>(len), vh, static_cast<int>(ld_in), 0.0f, oh,
                    static_cast<int>(ld_out));
      }
    }
  }
}

}  // namespace encoder_kit::cpu
