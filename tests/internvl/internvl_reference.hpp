// A float64 reference of transformers' InternVLModel.get_image_features on
// given tiles, written separately from the plugin and as directly as the
// PyTorch modules read: the Conv2d as a loop over its kernel, the CLS token
// and positions concatenated, full softmax attention per head, layer scales
// multiplied after each branch, pixel_shuffle as transformers' view / permute
// sequence (index arithmetic on the 4-d shapes), then the projector.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace internvl_ref {

struct Config {
  int64_t layers = 2, hidden = 32, heads = 4, inter = 48, image = 56, patch = 14, text = 40;
  int64_t shuffle = 2;    // 1 / downsample_ratio
  bool rms_norm = false;  // norm_type
  bool qk_norm = false;   // use_qk_norm
  bool attention_bias = false;
  bool mean_pooling = true;    // false: vision_tower.layernorm on the last layer
  int64_t feature_layer = -1;  // vision_feature_layer
  double eps = 1e-6;
  std::array<double, 3> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  int64_t grid() const { return image / patch; }
  int64_t rows_per_tile() const { return grid() * grid() / (shuffle * shuffle); }
};

// Plugin config entries describing the same model.
std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// Parameters by transformers' name without the "model." prefix, as doubles
// holding f32-representable values.
using Params = std::map<std::string, std::vector<double>>;
Params random_params(const Config& c, uint64_t seed);

// Writes every parameter as an F32 tensor named prefix + name.
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix = "model.");

// tiles: image x image x 3 bytes each. Returns [tiles x rows_per_tile, text].
std::vector<double> forward(const Config& c, const Params& p,
                            const std::vector<std::vector<uint8_t>>& tiles);

}  // namespace internvl_ref
