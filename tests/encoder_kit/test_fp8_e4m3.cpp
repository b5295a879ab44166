// The host e4m3 quantiser (encoder_kit/cuda/fp8_e4m3.hpp), the reference the
// FP8 kernels are checked against on the GPU: every code decodes to the value
// the format defines, conversion is the nearest value with ties to even,
// saturation at 448 and subnormals (against a float64 search over all codes),
// row quantisation's scale and error bound, and the error of a product of
// dequantised rows against the float64 product.
#include <encoder_kit/cuda/fp8_e4m3.hpp>
#include "kit_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using encoder_kit::cuda::e4m3_from_float;
using encoder_kit::cuda::e4m3_to_float;
using encoder_kit::cuda::kE4m3Max;
using encoder_kit::cuda::kFp8AmaxFloor;
using encoder_kit::cuda::quantize_row_e4m3;

// The format's value of a positive code, from its definition (bias 7, three
// mantissa bits, exponent field 0 subnormal), in float64.
double defined_value(int code) {
  const int e = code >> 3, m = code & 7;
  return e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
}

// The code nearest to f by search over every finite code (0x00..0x7e and
// their negatives), ties to the even code; beyond 448 that is 448 (saturation).
uint8_t nearest_code(float f) {
  const double a = std::fabs(static_cast<double>(f));
  int best = 0;
  double best_err = a;
  for (int c = 1; c <= 0x7e; ++c) {
    const double err = std::fabs(a - defined_value(c));
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) != 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

}  // namespace

TEST_CASE("e4m3 codes decode to the format's values") {
  for (int c = 0; c < 256; ++c) {
    CAPTURE(c);
    const float v = e4m3_to_float(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      CHECK(std::isnan(v));
      continue;
    }
    const double want = (c & 0x80 ? -1.0 : 1.0) * defined_value(c & 0x7f);
    CHECK(static_cast<double>(v) == want);
    // Every finite code is its own value's conversion (-0 keeps its sign).
    CHECK(static_cast<int>(e4m3_from_float(v)) == c);
  }
  CHECK(e4m3_to_float(0x7e) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));  // the smallest normal
}

TEST_CASE("e4m3 conversion: nearest value, ties to even, at every midpoint") {
  // Each pair of neighbouring codes: the midpoint goes to the even code, one
  // float step either side to the nearer one.
  for (int c = 0; c < 0x7e; ++c) {
    CAPTURE(c);
    const float mid = static_cast<float>((defined_value(c) + defined_value(c + 1)) / 2.0);
    REQUIRE(static_cast<double>(mid) == (defined_value(c) + defined_value(c + 1)) / 2.0);
    const int even = (c & 1) == 0 ? c : c + 1;
    CHECK(static_cast<int>(e4m3_from_float(mid)) == even);
    CHECK(static_cast<int>(e4m3_from_float(-mid)) == (even | 0x80));
    CHECK(static_cast<int>(e4m3_from_float(std::nextafter(mid, 0.0f))) == c);
    CHECK(static_cast<int>(e4m3_from_float(std::nextafter(mid, 1e9f))) == c + 1);
  }
}

TEST_CASE("e4m3 conversion: saturation, subnormals, special values") {
  CHECK(e4m3_from_float(448.0f) == 0x7e);
  CHECK(e4m3_from_float(463.0f) == 0x7e);
  CHECK(e4m3_from_float(464.0f) == 0x7e);  // would round to 480, which does not exist
  CHECK(e4m3_from_float(1e30f) == 0x7e);
  CHECK(e4m3_from_float(-1e30f) == 0xfe);
  CHECK(e4m3_from_float(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(e4m3_from_float(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK((e4m3_from_float(std::nanf("")) & 0x7f) == 0x7f);
  CHECK(e4m3_from_float(0.0f) == 0x00);
  CHECK(e4m3_from_float(-0.0f) == 0x80);
  CHECK(e4m3_from_float(std::ldexp(1.0f, -10)) == 0x00);  // half the smallest: tie to 0
  CHECK(e4m3_from_float(std::ldexp(1.5f, -10)) == 0x01);  // 0.75 of it: up
  CHECK(e4m3_from_float(std::ldexp(3.0f, -10)) == 0x02);  // 1.5 units: tie to even 2
  CHECK(e4m3_from_float(std::ldexp(7.5f, -9)) == 0x08);   // tie between 7 and 8 units
  CHECK(e4m3_from_float(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("e4m3 conversion matches a float64 search over all codes on random floats") {
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> log2mag(-14.0f, 10.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 200000; ++i) {
    const float f = (sign(gen) ? -1.0f : 1.0f) * std::exp2(log2mag(gen));
    CAPTURE(f);
    REQUIRE(static_cast<int>(e4m3_from_float(f)) == static_cast<int>(nearest_code(f)));
  }
}

TEST_CASE("row quantisation: scale from the row's amax, error within half a step") {
  std::mt19937 gen(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 1000;
  for (const float magnitude : {1e-6f, 1.0f, 3e4f}) {
    CAPTURE(magnitude);
    std::vector<float> x(n);
    for (float& v : x) v = magnitude * nd(gen);
    std::vector<uint8_t> q(n);
    const float s = quantize_row_e4m3(x.data(), n, q.data());
    float amax = 0.0f;
    for (const float v : x) amax = std::fmax(amax, std::fabs(v));
    CHECK(s == amax / 448.0f);
    bool saw_max = false;
    for (int64_t i = 0; i < n; ++i) {
      const double deq = static_cast<double>(s) * e4m3_to_float(q[i]);
      const double a = std::fabs(static_cast<double>(x[i]));
      // Half a step of three mantissa bits: 2^-4 relative for normals, half
      // of 2^-9 scale units below 2^-6 (subnormals); float's division adds
      // a few parts in 2^24.
      const double bound = std::fmax(a * 0.0625, static_cast<double>(s) * std::ldexp(1.0, -10));
      CHECK(std::fabs(deq - x[i]) <= bound * (1.0 + 1e-6));
      if ((q[i] & 0x7f) == 0x7e) saw_max = true;
    }
    CHECK(saw_max);  // the amax element lands on 448
  }
  std::vector<float> zeros(16, 0.0f);
  std::vector<uint8_t> q(16, 0xaa);
  CHECK(quantize_row_e4m3(zeros.data(), 16, q.data()) == kFp8AmaxFloor / kE4m3Max);
  for (const uint8_t c : q) CHECK(c == 0);
}

TEST_CASE("product of dequantised rows: per-element bound and relative error") {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t m = 17, n = 24, k = 256;
  std::vector<float> a(m * k), w(n * k);
  for (float& v : a) v = nd(gen);
  for (float& v : w) v = 0.05f * nd(gen);
  std::vector<uint8_t> qa(m * k), qw(n * k);
  std::vector<float> sa(m), sw(n);
  for (int64_t i = 0; i < m; ++i) sa[i] = quantize_row_e4m3(&a[i * k], k, &qa[i * k]);
  for (int64_t j = 0; j < n; ++j) sw[j] = quantize_row_e4m3(&w[j * k], k, &qw[j * k]);
  double diff2 = 0.0, ref2 = 0.0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, quant = 0.0, bound = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = a[i * k + p], y = w[j * k + p];
        const double xq = static_cast<double>(sa[i]) * e4m3_to_float(qa[i * k + p]);
        const double yq = static_cast<double>(sw[j]) * e4m3_to_float(qw[j * k + p]);
        exact += x * y;
        quant += xq * yq;
        // |x y - xq yq| <= |x| dy + |y| dx + dx dy, with each element's
        // half-step bound (row quantisation test above).
        const double dx = std::fmax(std::fabs(x) * 0.0625, sa[i] * std::ldexp(1.0, -10));
        const double dy = std::fmax(std::fabs(y) * 0.0625, sw[j] * std::ldexp(1.0, -10));
        bound += std::fabs(x) * dy + std::fabs(y) * dx + dx * dy;
      }
      CHECK(std::fabs(quant - exact) <= bound * (1.0 + 1e-6));
      diff2 += (quant - exact) * (quant - exact);
      ref2 += exact * exact;
    }
  // Random rounding errors of about 2-3% an operand add up to about 4% of a
  // random product's size; a biased or wrong quantiser is far above.
  const double rel = std::sqrt(diff2 / ref2);
  CHECK(rel < 0.06);
  CHECK(rel > 0.0);
}
