#include <encoder_kit/error.hpp>
#include <encoder_kit/fp8.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace encoder_kit {

float e4m3_to_f32(uint8_t code) {
  const float sign = (code & 0x80u) ? -1.0f : 1.0f;
  const int exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

uint8_t f32_to_e4m3(float v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = std::signbit(v) ? 0x80u : 0x00u;
  const float a = std::fabs(v);
  if (a >= kE4m3Max) return sign | 0x7eu;  // saturate (448 = 0x7e)
  // The spacing of representable values around a: 2^(e - 3) for a normal
  // a in [2^e, 2^(e+1)), e >= -6; 2^-9 below 2^-6 (subnormals).
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a in [2^(e-1), 2^e)
  const int step_exp = std::max(e - 1, -6) - 3;
  // Round to a multiple of the spacing, ties to even (nearbyint's default).
  const float units = std::nearbyint(std::ldexp(a, -step_exp));
  const float r = std::ldexp(units, step_exp);
  if (r >= kE4m3Max) return sign | 0x7eu;
  if (r == 0.0f) return sign;
  int re = 0;
  std::frexp(r, &re);
  const int exponent = re - 1 + 7;  // biased; rounding may have carried into the next binade
  if (exponent <= 0)                // subnormal: mantissa counts 2^-9 units
    return sign | static_cast<uint8_t>(std::ldexp(r, 9));
  const int mantissa = static_cast<int>(std::ldexp(r, -(re - 1)) * 8.0f) - 8;
  return sign | static_cast<uint8_t>((exponent << 3) | mantissa);
}

E4m3Rows quantize_rows_e4m3(const float* w, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) fail(EG_ERR_INVALID_ARGUMENT, "quantize_rows_e4m3: negative size");
  E4m3Rows out;
  out.codes.resize(static_cast<size_t>(rows * cols));
  out.scales.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float amax = 0.0f;
    bool finite = true;
    for (int64_t c = 0; c < cols; ++c) {
      finite = finite && std::isfinite(row[c]);
      amax = std::max(amax, std::fabs(row[c]));
    }
    if (!finite)
      fail(EG_ERR_INVALID_ARGUMENT,
           "quantize_rows_e4m3: row " + std::to_string(r) + " holds a value that is not finite");
    const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    out.scales[static_cast<size_t>(r)] = scale;
    for (int64_t c = 0; c < cols; ++c)
      out.codes[static_cast<size_t>(r * cols + c)] = f32_to_e4m3(row[c] / scale);
  }
  return out;
}

void fold_layer_norm(std::vector<float>& w, std::vector<float>& bias, int64_t rows, int64_t cols,
                     const std::vector<float>& gamma, const std::vector<float>& beta) {
  const auto n = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size()); };
  if (rows < 0 || cols <= 0 || n(w) != rows * cols || n(bias) != rows || n(gamma) != cols ||
      n(beta) != cols)
    fail(EG_ERR_INVALID_ARGUMENT, "fold_layer_norm: a [" + std::to_string(rows) + ", " +
                                      std::to_string(cols) + "] weight needs " +
                                      std::to_string(rows) + " biases and " + std::to_string(cols) +
                                      " norm weights and biases");
  for (int64_t r = 0; r < rows; ++r) {
    float* row = w.data() + r * cols;
    double shift = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      shift += static_cast<double>(row[c]) * beta[static_cast<size_t>(c)];
      row[c] *= gamma[static_cast<size_t>(c)];
    }
    bias[static_cast<size_t>(r)] =
        static_cast<float>(static_cast<double>(bias[static_cast<size_t>(r)]) + shift);
  }
}

}  // namespace encoder_kit
