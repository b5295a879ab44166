// A float64 reference of the Qwen2.5-VL vision tower and its processor,
// written separately from the plugin and as directly as the transformers
// implementation reads (index arithmetic of the processor's reshape/permute,
// get_window_index with its -100 padding, argsort for the inverse), so the
// plugin's optimised layout is checked against the plain definition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace qwen_ref {

struct Config {
  int64_t depth = 4, hidden = 64, heads = 4, inter = 96, out = 48;
  int64_t patch = 14, temporal = 2, merge = 2, window = 56;
  std::vector<int64_t> fullatt = {2};
  int64_t head_dim() const { return hidden / heads; }
  int64_t patch_dim() const { return 3 * temporal * patch * patch; }
};

// Plugin config entries for the same model.
std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// Named parameters (checkpoint names) as doubles holding f32-representable values.
using Params = std::map<std::string, std::vector<double>>;
Params random_params(const Config& c, uint64_t seed);
// Writes them as an F32 safetensors file with their checkpoint shapes.
// `name_prefix` goes before every name ("model." gives transformers >= 4.52's
// "model.visual." layout).
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& name_prefix = "");

struct Input {
  int64_t t, h, w;           // grid in patches
  std::vector<double> rows;  // processor-order patch rows [t*h*w, patch_dim]
};

// The processor's output for frames already sized to multiples of 28 (no
// resize): rescale, CLIP normalisation, time padding, the 9-D permute.
Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width);

// The tower on a batch; returns each item's [t*h*w/4, out] rows.
std::vector<std::vector<double>> forward(const Config& c, const Params& p,
                                         const std::vector<Input>& items);

// Random RGB frames.
std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed);

}  // namespace qwen_ref
