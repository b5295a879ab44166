#include "llava_tiling.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/pixel_rows.hpp>
#include <encoder_kit/tile_pixels.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace llava_onevision {
namespace {

using encoder_kit::fail;

// One tile (side x side x 3 bytes) appended as patch rows; pixels past the
// last whole patch are dropped, as the Conv2d's valid padding does.
void patchify(const Options& o, const uint8_t* rgb, std::vector<float>& rows) {
  const siglip::VisionConfig& c = o.model.vision;
  encoder_kit::image::append_tile_rows(
      encoder_kit::image::normalise_table(o.processor.mean, o.processor.std), rgb, c.image_size,
      c.patch_size, c.patch_cols(), rows);
}

std::vector<uint8_t> resize_rgb(const Options& o, const uint8_t* rgb, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w) {
  return encoder_kit::resize_rgb(rgb, h, w, out_h, out_w, o.processor.bilinear);
}

// One image's tiles: the base image, then the padded canvas cut row by row.
void image_rows(const Options& o, const std::vector<uint8_t>& rgb, int64_t h, int64_t w,
                std::vector<float>& rows) {
  const int64_t side = o.model.vision.image_size;
  patchify(o, resize_rgb(o, rgb.data(), h, w, side, side).data(), rows);
  const Resolution best = select_best_resolution(h, w, o.processor.pinpoints);
  const Resolution fit = patch_output_size(h, w, best);
  const std::vector<uint8_t> resized = resize_rgb(o, rgb.data(), h, w, fit.height, fit.width);
  // _get_padding_size: the odd pixel of padding goes to the bottom / right.
  const int64_t top = (best.height - fit.height) / 2, left = (best.width - fit.width) / 2;
  std::vector<uint8_t> canvas(static_cast<size_t>(best.height * best.width * 3), 0);
  for (int64_t y = 0; y < fit.height; ++y)
    std::copy_n(resized.begin() + y * fit.width * 3, fit.width * 3,
                canvas.begin() + ((top + y) * best.width + left) * 3);
  encoder_kit::for_each_tile(canvas.data(), best.height / side, best.width / side, side,
                             [&](const uint8_t* tile) { patchify(o, tile, rows); });
}

}  // namespace

Resolution select_best_resolution(int64_t height, int64_t width,
                                  const std::vector<Resolution>& pinpoints) {
  Resolution best{};
  int64_t max_effective = 0;
  int64_t min_wasted = INT64_MAX;
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  for (const Resolution& r : pinpoints) {
    const double scale =
        std::min(static_cast<double>(r.width) / w, static_cast<double>(r.height) / h);
    const int64_t dw = static_cast<int64_t>(w * scale), dh = static_cast<int64_t>(h * scale);
    const int64_t effective = std::min(dw * dh, width * height);
    const int64_t wasted = r.width * r.height - effective;
    if (effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      max_effective = effective;
      min_wasted = wasted;
      best = r;
    }
  }
  return best;
}

Resolution patch_output_size(int64_t height, int64_t width, Resolution target) {
  const double scale_w = static_cast<double>(target.width) / static_cast<double>(width);
  const double scale_h = static_cast<double>(target.height) / static_cast<double>(height);
  if (scale_w < scale_h)
    return {std::min(static_cast<int64_t>(std::ceil(static_cast<double>(height) * scale_w)),
                     target.height),
            target.width};
  return {target.height,
          std::min(static_cast<int64_t>(std::ceil(static_cast<double>(width) * scale_h)),
                   target.width)};
}

double python_floor_div(double a, double b) {
  // CPython's float_floor_div: the quotient of (a - fmod(a, b)), floored,
  // rounded up when it lands more than half below the next integer.
  const double mod = std::fmod(a, b);
  const double div = (a - mod) / b;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

ImageLayout image_layout(const Options& o, int64_t height, int64_t width) {
  const ModelConfig& m = o.model;
  const int64_t side = m.vision.image_size, g = m.grid();
  ImageLayout l;
  l.best = select_best_resolution(height, width, o.processor.pinpoints);
  l.grid_rows = l.best.height / side;
  l.grid_cols = l.best.width / side;
  // unpad_image on the (grid_rows g) x (grid_cols g) map, against (height, width).
  const int64_t cur_h = l.grid_rows * g, cur_w = l.grid_cols * g;
  const double original_aspect = static_cast<double>(width) / static_cast<double>(height);
  const double current_aspect = static_cast<double>(cur_w) / static_cast<double>(cur_h);
  // int(round(x, 7)): rounded to 7 decimals first, so 26.9999999999 counts as 27.
  auto round7_int = [](double x) {
    return static_cast<int64_t>(std::floor(std::nearbyint(x * 1e7) / 1e7));
  };
  l.map_h = cur_h;
  l.map_w = cur_w;
  if (original_aspect > current_aspect) {
    const double scale = static_cast<double>(cur_w) / static_cast<double>(width);
    const int64_t new_h = round7_int(static_cast<double>(height) * scale);
    const int64_t pad = (cur_h - new_h) / 2;
    l.crop_top = pad;
    l.map_h = cur_h - 2 * pad;
  } else {
    const double scale = static_cast<double>(cur_h) / static_cast<double>(height);
    const int64_t new_w = round7_int(static_cast<double>(width) * scale);
    const int64_t pad = (cur_w - new_w) / 2;
    l.crop_left = pad;
    l.map_w = cur_w - 2 * pad;
  }
  l.out_h = l.map_h;
  l.out_w = l.map_w;
  const double ratio = std::sqrt(static_cast<double>(l.map_h * l.map_w) /
                                 static_cast<double>(m.max_num_patches * g * g));
  if (ratio > 1.1) {
    l.out_h = static_cast<int64_t>(python_floor_div(static_cast<double>(l.map_h), ratio));
    l.out_w = static_cast<int64_t>(python_floor_div(static_cast<double>(l.map_w), ratio));
  }
  return l;
}

int64_t image_out_rows(const Options& o, const ImageLayout& l) {
  return o.model.rows_per_tile() + l.out_h * (l.out_w + 1);
}

int64_t video_out_rows(const Options& o, int64_t frames) {
  return frames * o.model.rows_per_frame() + 1;
}

void check_geometry(const Options& o, const eg_item_desc& d) {
  const bool video = d.modality == EG_MODALITY_VIDEO;
  if (d.modality != EG_MODALITY_IMAGE && !video)
    fail(EG_ERR_INVALID_ARGUMENT, "llava_onevision: items are images or videos (modality " +
                                      std::to_string(d.modality) + ")");
  if (!video && d.frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT, "llava_onevision: an image has exactly one frame, got " +
                                      std::to_string(d.frames) + " (send a video item instead)");
  if (video && (d.frames < 1 || d.frames > o.max_frames_per_video))
    fail(EG_ERR_INVALID_ARGUMENT,
         "llava_onevision: a video of " + std::to_string(d.frames) + " frames needs 1 to " +
             std::to_string(o.max_frames_per_video) + " (raise max_frames_per_video)");
  if (d.height <= 0 || d.width <= 0 || d.height > kMaxSide || d.width > kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "llava_onevision: an item of " + std::to_string(d.height) + "x" +
                                      std::to_string(d.width) + " needs each side in [1, " +
                                      std::to_string(kMaxSide) + "] pixels");
}

std::vector<float> patch_rows_from_pixels(const Options& o, const eg_item_desc& d) {
  encoder_kit::require_pixel_channels("llava_onevision", d.channels);
  const int64_t side = o.model.vision.image_size, n = d.height * d.width;
  std::vector<float> rows;
  for (int64_t f = 0; f < d.frames; ++f) {
    const std::vector<uint8_t> rgb =
        encoder_kit::to_rgb(d.pixels + f * n * d.channels, n, d.channels);
    if (d.modality == EG_MODALITY_VIDEO)
      patchify(o, resize_rgb(o, rgb.data(), d.height, d.width, side, side).data(), rows);
    else
      image_rows(o, rgb, d.height, d.width, rows);
  }
  return rows;
}

std::vector<float> synthetic_patch_rows(const Options& o, int64_t tiles, uint64_t seed) {
  std::vector<float> rows;
  for (int64_t t = 0; t < tiles; ++t)
    patchify(o,
             encoder_kit::synthetic_rgb_tile(o.model.vision.image_size, seed,
                                             0x11a7u + static_cast<uint64_t>(t))
                 .data(),
             rows);
  return rows;
}

}  // namespace llava_onevision
