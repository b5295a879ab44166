#include <encoder_kit/preprocessor_rules.hpp>

#include <cmath>

namespace encoder_kit {

void require_tile_size(const PreprocessorJson& j, const std::string& plugin, int64_t image_size) {
  for (const char* side : {"height", "width"}) {
    int64_t v = image_size;
    if (j.read_int("size", v, side))
      require_agree(plugin, "the tower's vision_config.image_size", image_size,
                    j.where() + "size." + side, v);
  }
}

bool read_bilinear(const PreprocessorJson& j, const std::string& plugin) {
  int64_t resample = 3;  // PIL: 2 BILINEAR, 3 BICUBIC (the processors' default)
  j.read_int("resample", resample);
  if (resample != 2 && resample != 3)
    fail(EG_ERR_UNSUPPORTED, plugin + ": " + j.where() + "resample is " + std::to_string(resample) +
                                 "; this plugin resizes bicubic (3) or bilinear (2) only");
  return resample == 2;
}

void read_rescale_and_normalise(const PreprocessorJson& j, const std::string& plugin,
                                std::array<double, 3>& mean, std::array<double, 3>& stddev) {
  const std::string& where = j.where();
  for (const char* flag : {"do_rescale", "do_normalize", "do_resize"})
    if (const Json* v = j.find(flag); v && !v->as_bool(where + flag))
      fail(EG_ERR_UNSUPPORTED, plugin + ": " + where + flag +
                                   " is false; this plugin always resizes, rescales by 1/255 "
                                   "and normalises");
  if (const Json* v = j.find("rescale_factor");
      v && std::fabs(v->as_double(where + "rescale_factor") - 1.0 / 255.0) > 1e-9)
    fail(EG_ERR_UNSUPPORTED, plugin + ": " + where + "rescale_factor must be 1/255");
  auto triple = [&](const char* key, std::array<double, 3>& dst) {
    const Json* v = j.find(key);
    if (!v) return;
    const auto& a = v->as_array(where + key);
    if (a.size() != 3)
      fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + where + key + " must list 3 values (RGB)");
    for (size_t i = 0; i < 3; ++i) dst[i] = a[i].as_double(where + key);
  };
  triple("image_mean", mean);
  triple("image_std", stddev);
  for (double s : stddev)
    if (!(s > 0) || !std::isfinite(s))
      fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + where + "image_std must be positive");
}

}  // namespace encoder_kit
