// FP8 E4M3 on the host against float64: every code's value, nearest rounding
// with ties to even on fresh random values, saturation, NaN, and the
// per-output-channel weight quantisation's scales and error bound, and the
// LayerNorm fold the FP8 blocks use.
#include "kit_test_support.hpp"

#include <encoder_kit/fp8.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

// The finite non-negative e4m3 values from the format's definition, in
// float64, indexed by code (0x00 .. 0x7e).
std::vector<double> e4m3_table() {
  std::vector<double> v;
  for (int code = 0; code <= 0x7e; ++code) {
    const int e = code >> 3, m = code & 7;
    v.push_back(e == 0 ? m * std::pow(2.0, -9) : (1.0 + m / 8.0) * std::pow(2.0, e - 7));
  }
  return v;
}

// The code nearest to a >= 0 in float64, ties to the even code, saturating.
int nearest_code(double a, const std::vector<double>& table) {
  if (a >= table.back()) return 0x7e;
  int best = 0;
  for (int c = 1; c < static_cast<int>(table.size()); ++c) {
    const double d = std::fabs(table[c] - a), db = std::fabs(table[best] - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return best;
}

}  // namespace

TEST_CASE("e4m3: every code decodes to the format's value") {
  const std::vector<double> table = e4m3_table();
  CHECK(table.back() == 448.0);
  CHECK(table[1] == std::pow(2.0, -9));
  for (int code = 0; code <= 0x7e; ++code) {
    CAPTURE(code);
    CHECK(static_cast<double>(encoder_kit::e4m3_to_f32(static_cast<uint8_t>(code))) == table[code]);
    CHECK(static_cast<double>(encoder_kit::e4m3_to_f32(static_cast<uint8_t>(code | 0x80))) ==
          -table[code]);
    // Exact values round-trip.
    CHECK(encoder_kit::f32_to_e4m3(static_cast<float>(table[code])) == code);
    CHECK(encoder_kit::f32_to_e4m3(-static_cast<float>(table[code])) == (code | 0x80));
  }
  CHECK(std::isnan(encoder_kit::e4m3_to_f32(0x7f)));
  CHECK(std::isnan(encoder_kit::e4m3_to_f32(0xff)));
}

TEST_CASE("e4m3: nearest rounding, ties to even, saturation and NaN") {
  const std::vector<double> table = e4m3_table();
  std::uniform_real_distribution<double> log2_mag(-12.0, 9.5);  // past 448 too
  for (int i = 0; i < 20000; ++i) {
    const float v = static_cast<float>(std::pow(2.0, log2_mag(kit_test::rng())));
    CAPTURE(v);
    REQUIRE(encoder_kit::f32_to_e4m3(v) == nearest_code(v, table));
    REQUIRE(encoder_kit::f32_to_e4m3(-v) == (nearest_code(v, table) | 0x80));
  }
  // Every midpoint between neighbours is a tie: the even code wins.
  for (int c = 0; c + 1 <= 0x7e; ++c) {
    const float mid = static_cast<float>((table[c] + table[c + 1]) / 2.0);
    CAPTURE(c);
    CHECK(encoder_kit::f32_to_e4m3(mid) == ((c & 1) == 0 ? c : c + 1));
  }
  CHECK(encoder_kit::f32_to_e4m3(1e6f) == 0x7e);
  CHECK(encoder_kit::f32_to_e4m3(-1e6f) == 0xfe);
  CHECK(encoder_kit::f32_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(encoder_kit::f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  CHECK(encoder_kit::f32_to_e4m3(1e-30f) == 0x00);
  CHECK(encoder_kit::f32_to_e4m3(-0.0f) == 0x80);
}

TEST_CASE("e4m3: a weight quantised per output channel, against float64") {
  const int64_t rows = 37, cols = 96;
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)  // rows of very different magnitudes
    for (int64_t c = 0; c < cols; ++c)
      w[static_cast<size_t>(r * cols + c)] =
          static_cast<float>(normal(kit_test::rng()) * std::pow(10.0, (r % 7) - 3));
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(5 * cols + c)] = 0.0f;  // a zero row
  const encoder_kit::E4m3Rows q = encoder_kit::quantize_rows_e4m3(w.data(), rows, cols);
  REQUIRE(q.codes.size() == w.size());
  REQUIRE(q.scales.size() == static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    CAPTURE(r);
    double amax = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      amax = std::max(amax, std::fabs(static_cast<double>(w[static_cast<size_t>(r * cols + c)])));
    const double scale = q.scales[static_cast<size_t>(r)];
    CHECK(scale == doctest::Approx(amax > 0 ? amax / 448.0 : 1.0).epsilon(1e-6));
    double err2 = 0.0, ref2 = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const double ref = w[i];
      const double got = encoder_kit::e4m3_to_f32(q.codes[i]) * scale;
      // Half a step of e4m3: 2^-4 relative for normal codes, 2^-10 of the
      // scale among subnormals; a little more for the float division.
      CHECK(std::fabs(got - ref) <= std::fabs(ref) * 0.0625 * 1.001 + scale * std::pow(2.0, -10));
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
    if (ref2 > 0) CHECK(std::sqrt(err2 / ref2) < 0.04);  // about 2-3% for normal draws
  }
  // The row's largest magnitude maps to 448.
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 5) continue;
    int most = 0;
    for (int64_t c = 0; c < cols; ++c) most = std::max(most, q.codes[r * cols + c] & 0x7f);
    CHECK(most == 0x7e);
  }
  std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  const kit_test::Failure f =
      kit_test::failure_of([&] { encoder_kit::quantize_rows_e4m3(bad.data(), 1, 2); });
  CHECK(f.thrown);
  CHECK(kit_test::contains(f.message, "row 0"));
}

// Folding a LayerNorm into the Linear after it: for fresh random rows, the
// Linear of the normalised row (float64, as the model computes it) equals the
// folded Linear of the centred row times rstd, to float rounding.
TEST_CASE("a LayerNorm folded into the next Linear gives the same product, against float64") {
  const int64_t rows = 23, cols = 72;
  std::normal_distribution<double> normal(0.0, 1.0);
  auto draw = [&](size_t n, double scale, double offset) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(offset + scale * normal(kit_test::rng()));
    return v;
  };
  const std::vector<float> w = draw(static_cast<size_t>(rows * cols), 0.05, 0.0);
  const std::vector<float> b = draw(static_cast<size_t>(rows), 0.1, 0.0);
  const std::vector<float> gamma = draw(static_cast<size_t>(cols), 0.3, 1.0);
  const std::vector<float> beta = draw(static_cast<size_t>(cols), 0.2, 0.0);
  std::vector<float> wf = w, bf = b;
  encoder_kit::fold_layer_norm(wf, bf, rows, cols, gamma, beta);
  const double eps = 1e-6;
  for (int trial = 0; trial < 5; ++trial) {
    const std::vector<float> x = draw(static_cast<size_t>(cols), 2.0, 3.0);  // off-centre rows
    double mean = 0.0, var = 0.0;
    for (float v : x) mean += v;
    mean /= cols;
    for (float v : x) var += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt(var / cols + eps);
    for (int64_t r = 0; r < rows; ++r) {
      double ref = b[static_cast<size_t>(r)], got = bf[static_cast<size_t>(r)], mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c), j = static_cast<size_t>(c);
        const double ln = (x[j] - mean) * rstd * gamma[j] + beta[j];
        ref += w[i] * ln;
        got += wf[i] * ((x[j] - mean) * rstd);
        mag += std::fabs(w[i] * ln);
      }
      CHECK(std::fabs(got - ref) <= 1e-5 * (mag + std::fabs(b[static_cast<size_t>(r)])));
    }
  }
  std::vector<float> short_bias(static_cast<size_t>(rows - 1));
  const kit_test::Failure f = kit_test::failure_of(
      [&] { encoder_kit::fold_layer_norm(wf, short_bias, rows, cols, gamma, beta); });
  CHECK(f.thrown);
  CHECK(kit_test::contains(f.message, "fold_layer_norm"));
}
