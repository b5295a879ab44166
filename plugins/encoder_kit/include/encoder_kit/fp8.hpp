// FP8 E4M3 (OCP "e4m3fn", torch.float8_e4m3fn) on the host: the conversions
// and the per-output-channel weight quantisation the FP8 products read.
//
// E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, the
// codes 0x7f and 0xff are NaN, the largest finite value is 448 and the
// smallest subnormal 2^-9. Conversions round to nearest, ties to even, and
// saturate to +-448 (the __NV_SATFINITE rule the kernels use), so a value
// past the range never becomes NaN; NaN stays NaN.
#pragma once

#include <cstdint>
#include <vector>

namespace encoder_kit {

inline constexpr float kE4m3Max = 448.0f;

float e4m3_to_f32(uint8_t code);
uint8_t f32_to_e4m3(float v);

// A [rows, cols] row-major weight (a Linear's [out, in]) as e4m3 codes and
// one scale per row: w[r, c] ~= e4m3_to_f32(q[r, c]) * scale[r], scale[r] =
// max_c |w[r, c]| / 448 (1 for an all-zero row). Per output channel, so a
// product's column j is multiplied by scale[j] once, after the sum.
struct E4m3Rows {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
E4m3Rows quantize_rows_e4m3(const float* w, int64_t rows, int64_t cols);

// A LayerNorm (weight gamma, bias beta, over `cols` features) folded into the
// Linear [rows, cols] that reads it: Linear(LN(x)) = ((x - mean) * rstd) W'^T
// + b' with W'[r, c] = W[r, c] * gamma[c] and b'[r] = b[r] + sum_c W[r, c] *
// beta[c] (summed in double). The FP8 blocks then quantise the centred row
// and carry rstd in its scale instead of running the norm. w and bias are
// updated in place (bias has `rows` values).
void fold_layer_norm(std::vector<float>& w, std::vector<float>& bias, int64_t rows, int64_t cols,
                     const std::vector<float>& gamma, const std::vector<float>& beta);

}  // namespace encoder_kit
