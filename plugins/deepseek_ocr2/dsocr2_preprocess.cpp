#include "dsocr2_layout.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/random.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace dsocr2 {
namespace {

float normalise(uint8_t v) {
  // rescale 1/255, then IMAGENET_STANDARD mean = std = 0.5
  return (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f;
}

constexpr uint8_t kPad = 127;  // background_color [127, 127, 127]

std::vector<uint8_t> to_rgb(const uint8_t* px, int64_t h, int64_t w, int64_t channels) {
  if (channels != 1 && channels != 3 && channels != 4)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,
        "deepseek_ocr2: images need 1, 3 or 4 channels, got " + std::to_string(channels));
  std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
  for (int64_t i = 0; i < h * w; ++i)
    for (int64_t c = 0; c < 3; ++c) rgb[i * 3 + c] = px[i * channels + (channels == 1 ? 0 : c)];
  return rgb;
}

}  // namespace

void check_geometry(const eg_item_desc& d) {
  using encoder_kit::fail;
  if (d.modality != EG_MODALITY_IMAGE)
    fail(EG_ERR_INVALID_ARGUMENT,
         "deepseek_ocr2: items are images only (got modality " + std::to_string(d.modality) + ")");
  if (d.frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "deepseek_ocr2: an image has exactly one frame, got " + std::to_string(d.frames));
  if (d.height <= 0 || d.width <= 0 || d.height > kMaxSide || d.width > kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: image of " + std::to_string(d.height) + "x" +
                                      std::to_string(d.width) + " has a side outside [1, " +
                                      std::to_string(kMaxSide) + "] pixels");
}

CropGrid crop_grid(const ModelConfig& m, int64_t height, int64_t width) {
  if (std::max(height, width) <= m.tile_size) return {};
  // get_all_supported_aspect_ratios: cols outer, rows inner, stable sort by area.
  std::vector<std::pair<int64_t, int64_t>> candidates;
  for (int64_t c = 1; c <= m.max_crops; ++c)
    for (int64_t r = 1; r <= m.max_crops; ++r)
      if (c * r >= m.min_crops && c * r <= m.max_crops) candidates.emplace_back(c, r);
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first * a.second < b.first * b.second;
  });
  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double tile_area = static_cast<double>(m.tile_size) * static_cast<double>(m.tile_size);
  double best_diff = std::numeric_limits<double>::infinity();
  CropGrid best{1, 1};
  for (const auto& [c, r] : candidates) {
    const double diff = std::fabs(aspect - static_cast<double>(c) / static_cast<double>(r));
    if (diff < best_diff) {
      best_diff = diff;
      best = {c, r};
    } else if (diff == best_diff && area > 0.5 * tile_area * static_cast<double>(c * r)) {
      // an exact tie favours the larger grid until it covers twice the image
      best = {c, r};
    }
  }
  return best;
}

Views preprocess(const ModelConfig& m, const uint8_t* pixels, int64_t height, int64_t width,
                 int64_t channels) {
  using encoder_kit::image::Filter;
  const std::vector<uint8_t> rgb = to_rgb(pixels, height, width, channels);
  Views v;
  // Global view: scale the long side to global_size (Python round: half to even).
  const int64_t S = m.global_size;
  const double scale = static_cast<double>(S) / static_cast<double>(std::max(height, width));
  const int64_t nh = std::max<int64_t>(
      1, static_cast<int64_t>(std::nearbyint(static_cast<double>(height) * scale)));
  const int64_t nw = std::max<int64_t>(
      1, static_cast<int64_t>(std::nearbyint(static_cast<double>(width) * scale)));
  const std::vector<uint8_t> g =
      encoder_kit::image::resize(rgb.data(), height, width, 3, nh, nw, Filter::Bicubic);
  const int64_t left = (S - nw) / 2, top = (S - nh) / 2;
  v.global.assign(static_cast<size_t>(3 * S * S), normalise(kPad));
  for (int64_t y = 0; y < nh; ++y)
    for (int64_t x = 0; x < nw; ++x)
      for (int64_t c = 0; c < 3; ++c)
        v.global[static_cast<size_t>((c * S + y + top) * S + x + left)] =
            normalise(g[static_cast<size_t>((y * nw + x) * 3 + c)]);
  // Local crops: the image resized (aspect not kept) to the grid, cut row-major.
  const CropGrid grid = crop_grid(m, height, width);
  v.num_crops = grid.count();
  if (v.num_crops == 0) return v;
  const int64_t T = m.tile_size, th = T * grid.rows, tw = T * grid.cols;
  const std::vector<uint8_t> big =
      encoder_kit::image::resize(rgb.data(), height, width, 3, th, tw, Filter::Bicubic);
  v.crops.resize(static_cast<size_t>(v.num_crops * 3 * T * T));
  for (int64_t i = 0; i < v.num_crops; ++i) {
    const int64_t row = i / grid.cols, col = i % grid.cols;
    float* out = v.crops.data() + i * 3 * T * T;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < T; ++y)
        for (int64_t x = 0; x < T; ++x)
          out[(c * T + y) * T + x] =
              normalise(big[static_cast<size_t>(((row * T + y) * tw + col * T + x) * 3 + c)]);
  }
  return v;
}

Views synthetic_views(const ModelConfig& m, int64_t height, int64_t width, uint64_t seed) {
  Views v;
  const int64_t S = m.global_size, T = m.tile_size;
  v.num_crops = crop_grid(m, height, width).count();
  v.global.resize(static_cast<size_t>(3 * S * S));
  v.crops.resize(static_cast<size_t>(v.num_crops * 3 * T * T));
  for (size_t i = 0; i < v.global.size(); ++i)
    v.global[i] = static_cast<float>(2.0 * encoder_kit::uniform01(seed, 1, i) - 1.0);
  for (size_t i = 0; i < v.crops.size(); ++i)
    v.crops[i] = static_cast<float>(2.0 * encoder_kit::uniform01(seed, 2, i) - 1.0);
  return v;
}

}  // namespace dsocr2
