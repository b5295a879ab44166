#include "layout.hpp"

#include "spec.hpp"

#include <encoder_kit/checked.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/pixel_rows.hpp>
#include <encoder_kit/random.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace qwen_vl {
namespace {

using encoder_kit::fail;

void check_aspect(int64_t height, int64_t width) {
  if (height <= 0 || width <= 0)
    fail(EG_ERR_INVALID_ARGUMENT,
         "item size must be positive, got " + std::to_string(height) + "x" + std::to_string(width));
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  if (std::max(h, w) / std::min(h, w) > 200.0)
    fail(EG_ERR_INVALID_ARGUMENT, "item " + std::to_string(height) + "x" + std::to_string(width) +
                                      ": absolute aspect ratio must be at most 200");
}

int64_t round_half_even(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

}  // namespace

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels) {
  check_aspect(height, width);
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double f = static_cast<double>(factor);
  int64_t h_bar = round_half_even(h / f) * factor;
  int64_t w_bar = round_half_even(w / f) * factor;
  if (encoder_kit::checked_mul(h_bar, w_bar, "the resized item's pixels") > max_pixels) {
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

std::pair<int64_t, int64_t> smart_resize_video(int64_t frames, int64_t height, int64_t width,
                                               int64_t temporal_factor, int64_t factor,
                                               int64_t min_pixels, int64_t max_pixels) {
  if (frames < temporal_factor)
    fail(EG_ERR_INVALID_ARGUMENT,
         "a video needs at least temporal_patch_size = " + std::to_string(temporal_factor) +
             " frames, got " + std::to_string(frames) +
             " (the model's video processor refuses it too; send an image)");
  check_aspect(height, width);
  double h = static_cast<double>(height), w = static_cast<double>(width);
  const double f = static_cast<double>(factor);
  if (height < factor || width < factor) {
    // int(height * scale) truncates, as Python's int() of a positive float.
    const double scale = std::max(f / h, f / w);
    h = std::floor(h * scale);
    w = std::floor(w * scale);
  }
  if (std::max(h, w) / std::min(h, w) > 200.0)
    fail(EG_ERR_INVALID_ARGUMENT, "video frames of " + std::to_string(height) + "x" +
                                      std::to_string(width) +
                                      ": absolute aspect ratio must be at most 200");
  const double n = static_cast<double>(frames);
  int64_t h_bar = round_half_even(h / f) * factor;
  int64_t w_bar = round_half_even(w / f) * factor;
  const int64_t t_bar = round_half_even(n / static_cast<double>(temporal_factor)) * temporal_factor;
  const int64_t total =
      encoder_kit::checked_product({t_bar, h_bar, w_bar}, "the resized video's pixels");
  if (total > max_pixels) {
    const double beta = std::sqrt(n * h * w / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (total < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (n * h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return {h_bar, w_bar};
}

Grid grid_for(const Options& o, bool video, int64_t height, int64_t width, int64_t frames) {
  const VisionConfig& c = o.model;
  const Spec& s = o.spec();
  const int64_t tp = c.temporal_patch_size, f = c.resize_factor();
  const auto [rh, rw] =
      video && s.video_pixels == VideoPixels::AllFrames
          ? smart_resize_video(frames, height, width, tp, f, o.video_min_pixels, o.video_max_pixels)
      // GLM-4.1V's image processor: the video rule over temporal_patch_size copies.
      : !video && s.image_pixels == ImagePixels::AsTemporalPatch
          ? smart_resize_video(tp, height, width, tp, f, o.min_pixels, o.max_pixels)
          : smart_resize(height, width, f, o.min_pixels, o.max_pixels);
  return {(frames + c.temporal_patch_size - 1) / c.temporal_patch_size, rh / c.patch_size,
          rw / c.patch_size};
}

std::vector<float> patch_rows_from_pixels(const Options& o, bool video, const uint8_t* pixels,
                                          int64_t frames, int64_t height, int64_t width,
                                          int64_t channels) {
  const VisionConfig& c = o.model;
  const Spec& s = o.spec();
  if (channels != 3 && channels != 1 && channels != 4)
    fail(EG_ERR_INVALID_ARGUMENT, std::string(o.spec().name) +
                                      ": pixels must have 1, 3 or 4 channels, got " +
                                      std::to_string(channels));
  const Grid g = grid_for(o, video, height, width, frames);
  const int64_t rh = g.h * c.patch_size, rw = g.w * c.patch_size;
  // Each frame as RGB at the grid's size: the caller's pixels themselves when
  // they already are, else a resized or channel-expanded copy.
  std::vector<std::vector<uint8_t>> copies;
  std::vector<const uint8_t*> rgb(static_cast<size_t>(frames));
  const int64_t frame_bytes = height * width * channels;
  for (int64_t f = 0; f < frames; ++f) {
    const uint8_t* src = pixels + f * frame_bytes;
    const bool same_size = rh == height && rw == width;
    if (same_size && channels == 3) {
      rgb[static_cast<size_t>(f)] = src;
      continue;
    }
    std::vector<uint8_t> resized =
        same_size ? std::vector<uint8_t>(src, src + frame_bytes)
                  : encoder_kit::image::resize(src, height, width, channels, rh, rw,
                                               encoder_kit::image::Filter::Bicubic);
    std::vector<uint8_t>& out = copies.emplace_back(static_cast<size_t>(rh * rw * 3));
    for (int64_t i = 0; i < rh * rw; ++i)
      for (int64_t ch = 0; ch < 3; ++ch)
        out[i * 3 + ch] = resized[i * channels + (channels == 1 ? 0 : ch)];
    rgb[static_cast<size_t>(f)] = out.data();
  }
  const encoder_kit::image::NormaliseTable table =
      encoder_kit::image::normalise_table(s.image_mean, s.image_std);
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
            for (int64_t ch = 0; ch < 3; ++ch) {
              const std::array<float, 256>& lut = table[static_cast<size_t>(ch)];
              for (int64_t tt = 0; tt < tp; ++tt) {
                // Time padding repeats the last frame.
                const uint8_t* frame = rgb[static_cast<size_t>(std::min(t * tp + tt, frames - 1))];
                for (int64_t y = 0; y < p; ++y) {
                  const uint8_t* line = frame + ((py + y) * rw + px) * 3 + ch;
                  for (int64_t x = 0; x < p; ++x) *dst++ = lut[line[x * 3]];
                }
              }
            }
          }
  return rows;
}

std::vector<float> synthetic_patch_rows(const VisionConfig& c, const Grid& grid, uint64_t seed) {
  const Spec& s = *c.spec;
  const int64_t dim = c.patch_dim();
  const int64_t per_channel = dim / c.in_channels;
  const encoder_kit::image::NormaliseTable table =
      encoder_kit::image::normalise_table(s.image_mean, s.image_std);
  std::vector<float> rows(static_cast<size_t>(grid.patches() * dim));
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto v =
        static_cast<uint8_t>(encoder_kit::uniform01(seed, s.synthetic_stream, i) * 256.0);
    rows[i] = table[static_cast<size_t>((static_cast<int64_t>(i) % dim) / per_channel)][v];
  }
  return rows;
}

}  // namespace qwen_vl
