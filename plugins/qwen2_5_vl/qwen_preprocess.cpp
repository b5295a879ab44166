#include "qwen_preprocess.hpp"

#include <encoder_kit/checked.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/random.hpp>

#include <algorithm>
#include <cmath>

namespace qwen {
namespace {

using encoder_kit::fail;

// OPENAI_CLIP_MEAN / OPENAI_CLIP_STD, the processor's defaults.
constexpr double kMean[3] = {0.48145466, 0.4578275, 0.40821073};
constexpr double kStd[3] = {0.26862954, 0.26130258, 0.27577711};

float normalise(int channel, uint8_t v) {
  return static_cast<float>((static_cast<double>(v) / 255.0 - kMean[channel]) / kStd[channel]);
}

}  // namespace

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels) {
  if (height <= 0 || width <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "image size must be positive, got " + std::to_string(height) +
                                      "x" + std::to_string(width));
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double f = static_cast<double>(factor);
  if (std::max(h, w) / std::min(h, w) > 200.0)
    fail(EG_ERR_INVALID_ARGUMENT, "image " + std::to_string(height) + "x" + std::to_string(width) +
                                      ": absolute aspect ratio must be at most 200");
  // Python's round() rounds half to even, as nearbyint does in the default mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (encoder_kit::checked_mul(h_bar, w_bar, "qwen2_5_vl: the resized item's pixels") >
      max_pixels) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

Grid grid_for(const Options& o, int64_t height, int64_t width, int64_t frames) {
  const VisionConfig& c = o.model;
  const auto [rh, rw] = smart_resize(height, width, c.resize_factor(), o.min_pixels, o.max_pixels);
  return {(frames + c.temporal_patch_size - 1) / c.temporal_patch_size, rh / c.patch_size,
          rw / c.patch_size};
}

std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t frames,
                                          int64_t height, int64_t width, int64_t channels) {
  const VisionConfig& c = o.model;
  if (channels != 3 && channels != 1 && channels != 4)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: pixels must have 1, 3 or 4 channels, got " + std::to_string(channels));
  const Grid g = grid_for(o, height, width, frames);
  const int64_t rh = g.h * c.patch_size, rw = g.w * c.patch_size;
  // Resize each frame to the processor's size, expanded to RGB.
  std::vector<std::vector<uint8_t>> rgb(static_cast<size_t>(frames));
  const int64_t frame_bytes = height * width * channels;
  for (int64_t f = 0; f < frames; ++f) {
    const uint8_t* src = pixels + f * frame_bytes;
    std::vector<uint8_t> resized =
        (rh == height && rw == width)
            ? std::vector<uint8_t>(src, src + frame_bytes)
            : encoder_kit::image::resize(src, height, width, channels, rh, rw,
                                         encoder_kit::image::Filter::Bicubic);
    std::vector<uint8_t>& out = rgb[f];
    out.resize(static_cast<size_t>(rh * rw * 3));
    for (int64_t i = 0; i < rh * rw; ++i)
      for (int64_t ch = 0; ch < 3; ++ch)
        out[i * 3 + ch] = resized[i * channels + (channels == 1 ? 0 : ch)];
  }
  const int64_t p = c.patch_size, tp = c.temporal_patch_size, m = c.spatial_merge_size;
  const int64_t dim = c.patch_dim();
  std::vector<float> rows(static_cast<size_t>(g.patches() * dim));
  int64_t row = 0;
  for (int64_t t = 0; t < g.t; ++t)
    for (int64_t bh = 0; bh < g.h / m; ++bh)
      for (int64_t bw = 0; bw < g.w / m; ++bw)
        for (int64_t mh = 0; mh < m; ++mh)
          for (int64_t mw = 0; mw < m; ++mw, ++row) {
            const int64_t py = (bh * m + mh) * p, px = (bw * m + mw) * p;
            float* dst = rows.data() + row * dim;
            for (int64_t ch = 0; ch < 3; ++ch)
              for (int64_t tt = 0; tt < tp; ++tt) {
                // Time padding repeats the last frame.
                const std::vector<uint8_t>& frame = rgb[std::min(t * tp + tt, frames - 1)];
                for (int64_t y = 0; y < p; ++y)
                  for (int64_t x = 0; x < p; ++x)
                    *dst++ =
                        normalise(static_cast<int>(ch), frame[((py + y) * rw + px + x) * 3 + ch]);
              }
          }
  return rows;
}

std::vector<float> synthetic_patch_rows(const VisionConfig& c, const Grid& grid, uint64_t seed) {
  const int64_t dim = c.patch_dim();
  const int64_t per_channel = dim / c.in_channels;
  std::vector<float> rows(static_cast<size_t>(grid.patches() * dim));
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto v = static_cast<uint8_t>(encoder_kit::uniform01(seed, 0x51a7u, i) * 256.0);
    rows[i] = normalise(static_cast<int>((static_cast<int64_t>(i) % dim) / per_channel), v);
  }
  return rows;
}

}  // namespace qwen
