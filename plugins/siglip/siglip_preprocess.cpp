#include "siglip_batch.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/random.hpp>

#include <string>

namespace siglip {
namespace {

// IMAGENET_STANDARD_MEAN / _STD, the processor's defaults: (v/255 - 0.5) / 0.5.
float normalise(uint8_t v) {
  return static_cast<float>((static_cast<double>(v) / 255.0 - 0.5) / 0.5);
}

// rgb: image_size^2 x 3 bytes.
std::vector<float> patchify(const VisionConfig& c, const std::vector<uint8_t>& rgb) {
  const int64_t p = c.patch_size, g = c.grid(), side = c.image_size, cols = c.patch_cols();
  std::vector<float> rows(static_cast<size_t>(c.tokens_per_image() * cols), 0.0f);
  for (int64_t gy = 0; gy < g; ++gy)
    for (int64_t gx = 0; gx < g; ++gx) {
      float* dst = rows.data() + (gy * g + gx) * cols;
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x)
            *dst++ = normalise(rgb[((gy * p + y) * side + gx * p + x) * 3 + ch]);
    }
  return rows;
}

}  // namespace

void check_geometry(const eg_item_desc& d) {
  using encoder_kit::fail;
  if (d.modality != EG_MODALITY_IMAGE)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: only images are supported (modality " + std::to_string(d.modality) + ")");
  if (d.frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: an image has exactly one frame, got " + std::to_string(d.frames));
  if (d.height <= 0 || d.width <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: image size must be positive, got " +
                                      std::to_string(d.height) + "x" + std::to_string(d.width));
  if (d.height > kMaxSide || d.width > kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: image of " + std::to_string(d.height) + "x" +
                                      std::to_string(d.width) + " has a side over " +
                                      std::to_string(kMaxSide) + " pixels");
}

std::vector<float> patch_rows_from_pixels(const Options& o, const uint8_t* pixels, int64_t height,
                                          int64_t width, int64_t channels) {
  const VisionConfig& c = o.model;
  if (channels != 1 && channels != 3 && channels != 4)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, "siglip: pixels must have 1, 3 or 4 channels, got " +
                                                   std::to_string(channels));
  const int64_t side = c.image_size;
  const std::vector<uint8_t> resized =
      (height == side && width == side)
          ? std::vector<uint8_t>(pixels, pixels + height * width * channels)
          : encoder_kit::image::resize(pixels, height, width, channels, side, side,
                                       o.bilinear_resize ? encoder_kit::image::Filter::Bilinear
                                                         : encoder_kit::image::Filter::Bicubic);
  std::vector<uint8_t> rgb(static_cast<size_t>(side * side * 3));
  for (int64_t i = 0; i < side * side; ++i)
    for (int64_t ch = 0; ch < 3; ++ch)
      rgb[i * 3 + ch] = resized[i * channels + (channels == 1 ? 0 : ch)];
  return patchify(c, rgb);
}

std::vector<float> synthetic_patch_rows(const Options& o, uint64_t seed) {
  const int64_t side = o.model.image_size;
  std::vector<uint8_t> rgb(static_cast<size_t>(side * side * 3));
  for (size_t i = 0; i < rgb.size(); ++i)
    rgb[i] = static_cast<uint8_t>(encoder_kit::uniform01(seed, 0x5161u, i) * 256.0);
  return patchify(o.model, rgb);
}

}  // namespace siglip
