// What the plugins whose image processor rescales by 1/255 and normalises by a
// per-channel mean and std read alike from a checkpoint folder's
// preprocessor_config.json. Errors name the plugin, the file and the key, as
// PreprocessorJson's do.
#pragma once

#include <encoder_kit/config_json.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace encoder_kit {

// OpenAI CLIP's normalisation: the default of the Hugging Face image
// processors derived from CLIP's when the file lists no image_mean / image_std.
inline constexpr std::array<double, 3> kClipMean{0.48145466, 0.4578275, 0.40821073};
inline constexpr std::array<double, 3> kClipStd{0.26862954, 0.26130258, 0.27577711};

// The file's size.height and size.width, when present, must be the tower's
// image_size (one tile): throws Error(INVALID_ARGUMENT) naming both otherwise.
void require_tile_size(const PreprocessorJson& j, const std::string& plugin, int64_t image_size);

// The file's resample (PIL: 2 BILINEAR, 3 BICUBIC; absent: 3): true for
// bilinear. Throws Error(UNSUPPORTED) for any other filter.
bool read_bilinear(const PreprocessorJson& j, const std::string& plugin);

// do_rescale, do_normalize and do_resize must not be false and rescale_factor
// must be 1/255 (Error(UNSUPPORTED) otherwise: the plugin always does them);
// image_mean and image_std, when present, replace mean and stddev and must list
// 3 values, std positive and finite (Error(INVALID_ARGUMENT) otherwise).
void read_rescale_and_normalise(const PreprocessorJson& j, const std::string& plugin,
                                std::array<double, 3>& mean, std::array<double, 3>& stddev);

}  // namespace encoder_kit
