// LLaVA-OneVision's vision side as transformers runs it
// (LlavaOnevisionModel.get_image_features / get_video_features): the SigLIP
// tower (`vision_config`, plugins/siglip), the multi_modal_projector and the
// anyres packing, configured from a checkpoint's config.json and
// preprocessor_config.json or from the plugin's keys.
#pragma once

#include "siglip_config.hpp"

#include <encgraph/plugin_api.h>

#include <encoder_kit/config.hpp>

#include <encgraph/sdk/config.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace llava_onevision {

// A resolution of the anyres grid, in pixels, as image_grid_pinpoints lists it.
struct Resolution {
  int64_t height = 0;
  int64_t width = 0;
};

// The released tower (siglip-so400m-patch14-384 with 26 layers) and the 7B's
// text width; a config.json overrides each.
struct ModelConfig {
  siglip::VisionConfig vision{1152, 26, 16, 4304, 384, 14, 3, 1e-6f};
  int64_t text_hidden_size = 3584;  // text_config.hidden_size: the projector's output
  int64_t feature_layer = -1;       // vision_feature_layer (hidden_states index)
  bool projector_bias = true;       // multimodal_projector_bias
  int64_t max_num_patches = 9;      // vision_aspect_ratio "anyres_max_<n>"

  int64_t grid() const { return vision.grid(); }                       // 27
  int64_t rows_per_tile() const { return vision.tokens_per_image(); }  // 729 tower rows
  // Pooled rows of a video frame: bilinear to ceil(grid / 2) per side (196).
  int64_t pooled_side() const { return (grid() + 1) / 2; }
  int64_t rows_per_frame() const { return pooled_side() * pooled_side(); }
  // The most output rows one tile can give: its rows plus a newline per row
  // of the grid (an image of n grid tiles gives at most 729 (n + 1) + 27 n).
  int64_t max_out_rows_per_tile() const { return rows_per_tile() + grid(); }
  // Throws Error(INVALID_ARGUMENT) naming the inconsistent or out-of-range setting.
  void validate() const;
};

// LlavaOnevisionImageProcessor (and its video processor) as the released
// preprocessor_config.json sets it.
struct Processor {
  std::vector<Resolution> pinpoints;  // image_grid_pinpoints, each a multiple of the tile
  bool bilinear = false;              // resample 2; bicubic (3) otherwise
  // The released values; a preprocessor_config.json without them means the
  // processor's defaults (OpenAI CLIP's) instead.
  std::array<double, 3> mean = {0.5, 0.5, 0.5};
  std::array<double, 3> std = {0.5, 0.5, 0.5};
};

// The released image_grid_pinpoints: every (h, w) in {1..6} x {1..6} tiles of `tile`.
std::vector<Resolution> default_pinpoints(int64_t tile);

inline constexpr int64_t kMaxSide = int64_t{1} << 20;  // an image side in pixels

using Dtype = encoder_kit::ComputeDtype;

struct Options : encoder_kit::RunOptions {
  ModelConfig model;
  Processor processor;
  std::string config_path;  // the config.json the sizes came from, or ""
  // Before vision_tower.*, multi_modal_projector.* and image_newline: "auto"
  // picks "model." (transformers 5 saves) or "" (the released llava-hf files)
  // by which one holds image_newline.
  std::string weight_prefix = "auto";
  Dtype dtype = Dtype::F32;
  // CUDA: the SigLIP tower's layers in FP8 (docs/precision.md); the projector stays bf16.
  encoder_kit::Precision precision = encoder_kit::Precision::Bf16;
  int64_t max_budget_tiles = 64;      // the largest graph holds this many tiles
  int32_t max_frames_per_video = 32;  // at most max_budget_tiles when not set

  // Tiles one image can get: the largest pinpoint's grid plus the base image.
  int64_t max_image_tiles() const;
  // The SigLIP tower's options: hidden_states[feature_layer] as its only
  // output, weights under `tower_prefix` (e.g. "model.vision_tower.vision_model.").
  siglip::Options tower(const std::string& tower_prefix) const;
};

// Reads the plugin table's keys (see the plugin's header comment) and refuses
// any other; params.weights may name a checkpoint folder.
Options parse_options(encgraph::sdk::Config& config, const eg_create_params& params);
Options parse_options(const eg_create_params* params);

}  // namespace llava_onevision
