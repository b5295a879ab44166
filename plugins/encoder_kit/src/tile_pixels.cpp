#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>
#include <encoder_kit/random.hpp>
#include <encoder_kit/tile_pixels.hpp>

namespace encoder_kit {

void require_pixel_channels(const std::string& plugin, int64_t channels) {
  if (channels != 1 && channels != 3 && channels != 4)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": pixels must have 1, 3 or 4 channels, got " + std::to_string(channels));
}

std::vector<uint8_t> to_rgb(const uint8_t* px, int64_t pixels, int64_t channels) {
  std::vector<uint8_t> rgb(static_cast<size_t>(pixels * 3));
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t ch = 0; ch < 3; ++ch)
      rgb[i * 3 + ch] = px[i * channels + (channels == 1 ? 0 : ch)];
  return rgb;
}

std::vector<uint8_t> resize_rgb(const uint8_t* rgb, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, bool bilinear) {
  if (h == out_h && w == out_w) return std::vector<uint8_t>(rgb, rgb + h * w * 3);
  return image::resize(rgb, h, w, 3, out_h, out_w,
                       bilinear ? image::Filter::Bilinear : image::Filter::Bicubic);
}

std::vector<uint8_t> synthetic_rgb_tile(int64_t side, uint64_t seed, uint64_t stream) {
  std::vector<uint8_t> rgb(static_cast<size_t>(side * side * 3));
  for (size_t i = 0; i < rgb.size(); ++i)
    rgb[i] = static_cast<uint8_t>(uniform01(seed, stream, i) * 256.0);
  return rgb;
}

}  // namespace encoder_kit
