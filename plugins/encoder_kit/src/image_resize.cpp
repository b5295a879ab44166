#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace encoder_kit::image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
  constexpr double a = -0.5;  // PIL's choice
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Per output pixel: the first input index and fixed-point weights.
struct Taps {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // out x taps
};

Taps precompute(int64_t in_size, int64_t out_size, Filter filter) {
  const double support_1 = filter == Filter::Bicubic ? 2.0 : 1.0;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = support_1 * filter_scale;
  Taps t;
  t.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(static_cast<size_t>(out_size * t.taps), 0);
  std::vector<double> w(static_cast<size_t>(t.taps));
  for (int64_t o = 0; o < out_size; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);
    int64_t hi = static_cast<int64_t>(center + support + 0.5);
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, in_size);
    const int64_t n = std::min(hi - lo, t.taps);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double x = (static_cast<double>(i + lo) - center + 0.5) / filter_scale;
      w[i] = filter == Filter::Bicubic ? bicubic(x) : triangle(x);
      total += w[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      const double k = total != 0.0 ? w[i] / total : 0.0;
      const double fixed = k * static_cast<double>(1 << kPrecisionBits);
      t.weights[o * t.taps + i] = static_cast<int32_t>(k < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    t.first[o] = lo;
    t.count[o] = n;
  }
  return t;
}

uint8_t clip8(int64_t acc) {
  const int64_t v = acc >> kPrecisionBits;
  return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
}

}  // namespace

std::vector<uint8_t> resize(const uint8_t* src, int64_t height, int64_t width, int64_t channels,
                            int64_t out_h, int64_t out_w, Filter filter) {
  if (height <= 0 || width <= 0 || channels <= 0 || out_h <= 0 || out_w <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "resize: sizes must be positive, got " + std::to_string(height) +
                                      "x" + std::to_string(width) + " -> " + std::to_string(out_h) +
                                      "x" + std::to_string(out_w));
  std::vector<uint8_t> cur(src, src + height * width * channels);
  int64_t cur_w = width;
  constexpr int64_t kRound = int64_t{1} << (kPrecisionBits - 1);
  if (out_w != width) {
    const Taps t = precompute(width, out_w, filter);
    std::vector<uint8_t> next(static_cast<size_t>(height * out_w * channels));
    for (int64_t y = 0; y < height; ++y)
      for (int64_t o = 0; o < out_w; ++o)
        for (int64_t c = 0; c < channels; ++c) {
          int64_t acc = kRound;
          for (int64_t i = 0; i < t.count[o]; ++i)
            acc += static_cast<int64_t>(cur[(y * width + t.first[o] + i) * channels + c]) *
                   t.weights[o * t.taps + i];
          next[(y * out_w + o) * channels + c] = clip8(acc);
        }
    cur.swap(next);
    cur_w = out_w;
  }
  if (out_h != height) {
    const Taps t = precompute(height, out_h, filter);
    std::vector<uint8_t> next(static_cast<size_t>(out_h * cur_w * channels));
    for (int64_t o = 0; o < out_h; ++o)
      for (int64_t x = 0; x < cur_w; ++x)
        for (int64_t c = 0; c < channels; ++c) {
          int64_t acc = kRound;
          for (int64_t i = 0; i < t.count[o]; ++i)
            acc += static_cast<int64_t>(cur[((t.first[o] + i) * cur_w + x) * channels + c]) *
                   t.weights[o * t.taps + i];
          next[(o * cur_w + x) * channels + c] = clip8(acc);
        }
    cur.swap(next);
  }
  return cur;
}

}  // namespace encoder_kit::image
