// FP8 e4m3 (the "fn" variant: no infinities, one NaN code per sign, largest
// finite 448) on the host: the reference quantiser the device kernel
// (quantize_rows_e4m3, fp8_gemm.hpp) matches bit for bit, and the weights'
// per-row quantisation at load. Plain C++: the CPU tests include it.
//
// A row r of x is stored as q[r, :] = e4m3(x[r, :] / scale[r]) with
// scale[r] = max(amax(x[r, :]), kFp8AmaxFloor) / 448, so x ~ scale * q.
// Conversion rounds to nearest, ties to even, and saturates at +-448 (what
// cvt.rn.satfinite.e4m3x2.f32 does on the GPU); subnormals are kept.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace encoder_kit::cuda {

inline constexpr float kE4m3Max = 448.0f;
// The smallest amax a scale is made from: an all-zero row gets a finite,
// positive scale (its codes are all zero).
inline constexpr float kFp8AmaxFloor = 1e-12f;

// The value of an e4m3 code (NaN for 0x7f and 0xff).
inline float e4m3_to_float(uint8_t code) {
  const float sign = (code & 0x80) != 0 ? -1.0f : 1.0f;
  const int e = (code >> 3) & 0xf, m = code & 0x7;
  if (e == 0xf && m == 0x7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);      // 1.m * 2^(e-7)
}

// The e4m3 code nearest to f: ties to even mantissa, |f| >= 448 (infinities
// too) saturated to +-448, NaN to 0x7f.
inline uint8_t e4m3_from_float(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= kE4m3Max) return sign | 0x7e;
  if (a == 0.0) return sign;
  // The spacing of e4m3 values around a: 2^-9 below the smallest normal
  // 2^-6, else 2^(floor(log2 a) - 3) (three mantissa bits).
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1): floor(log2 a) = e2 - 1
  const int exponent = std::max(e2 - 1, -6);
  const double quantum = std::ldexp(1.0, exponent - 3);
  const double units = a / quantum;  // exact: a power-of-two division, units < 16
  double r = std::floor(units);
  const double frac = units - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  // r * quantum, encoded: r in [0, 16]; 16 is the next binade's 1.000.
  if (exponent == -6 && r < 8.0) return sign | static_cast<uint8_t>(r);  // subnormal or zero
  int e = exponent + 7;
  if (r >= 16.0) {
    r /= 2.0;
    ++e;
  }
  // a < 448 rounds at most to 448 (e = 15, mantissa 6): never to the NaN code.
  return sign | static_cast<uint8_t>(e << 3) | static_cast<uint8_t>(static_cast<int>(r) - 8);
}

// Row quantisation as above: q[0..n) and the returned scale. x as float (bf16
// activations are exact in float). The division is float's, as the kernel's.
inline float quantize_row_e4m3(const float* x, int64_t n, uint8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float scale = std::fmax(amax, kFp8AmaxFloor) / kE4m3Max;
  for (int64_t i = 0; i < n; ++i) q[i] = e4m3_from_float(x[i] / scale);
  return scale;
}

}  // namespace encoder_kit::cuda
