// Scalar conversions between the storage dtypes weights and buffers use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace encoder_kit {

inline float bf16_to_f32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as PyTorch's .to(torch.bfloat16) does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu))
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Rows kept in an instance's dtype: as f32 (into `f32`), or rounded to bf16
// (into `bf16`, when `to_bf16`); the other vector stays empty.
inline void keep_rows(bool to_bf16, const std::vector<float>& rows, std::vector<float>& f32,
                      std::vector<uint16_t>& bf16) {
  if (!to_bf16) {
    f32 = rows;
    return;
  }
  bf16.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) bf16[i] = f32_to_bf16(rows[i]);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

// Round to nearest even; overflow becomes infinity.
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {                                               // subnormal or zero
    const float scaled = std::fabs(f) * 16777216.0f;                     // units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t r = abs - 0x38000000u;  // rebias the exponent from 127 to 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

// Bytes of one element of an eg_dtype (0 for an unknown code).
inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case 0: return 4;  // F32
    case 1: return 2;  // F16
    case 2: return 2;  // BF16
    case 3: return 8;  // F64
    case 4: return 4;  // I32
    case 5: return 8;  // I64
    case 6: return 1;  // U8
    default: return 0;
  }
}

}  // namespace encoder_kit
