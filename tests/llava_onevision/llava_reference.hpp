// A float64 reference of transformers' LlavaOnevisionModel on given tiles,
// written separately from the plugin and as directly as the PyTorch code
// reads: the SigLIP tower of tests/siglip's reference (hidden_states[-1]),
// the projector, and pack_image_features / apply_pooling as the view,
// permute, unpad_image slice, bilinear interpolate and newline concatenation
// on [channels, height, width] maps.
#pragma once

#include "../siglip/siglip_reference.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace llava_ref {

using Mat = std::vector<double>;

struct Config {
  siglip_ref::Config tower;  // 26-pixel tiles of 4 x 4 patches
  int64_t text = 40;
  int64_t max_num_patches = 9;  // anyres_max_<n>
  int64_t grid() const { return tower.grid(); }
};

struct Params {
  siglip_ref::Params tower;  // without the "vision_model." prefix
  Mat l1w, l1b, l2w, l2b, newline;
};
Params random_params(const Config& c, uint64_t seed);

// Writes the tower (no pooling head, as LLaVA checkpoints) under
// prefix + tower (a SiglipVisionModel's names, or the bare transformer's with
// "vision_tower."), then the projector and image_newline.
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix = "model.",
                  const std::string& tower = "vision_tower.vision_model.");

// Plugin config entries describing the same model.
std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// tiles: the base tile then the grid_rows x grid_cols tiles row by row, each
// image x image x 3 bytes; (height, width): the original image. Returns
// [rows, text]: what get_image_features packs for the image.
Mat image_features(const Config& c, const Params& p, const std::vector<std::vector<uint8_t>>& tiles,
                   int64_t grid_rows, int64_t grid_cols, int64_t height, int64_t width);

// frames: one tile each. Returns get_video_features' rows and the newline the
// forward appends: [frames x ceil(g/2)^2 + 1, text].
Mat video_features(const Config& c, const Params& p,
                   const std::vector<std::vector<uint8_t>>& frames);

}  // namespace llava_ref
