// InternVL's image encoder as transformers runs it (InternVLModel.get_image_features):
// the InternViT tower (`vision_config`), the pixel shuffle and the
// multi_modal_projector, configured from a checkpoint's config.json and
// preprocessor_config.json or from the plugin's keys.
#pragma once

#include <encgraph/plugin_api.h>

#include <encoder_kit/config.hpp>
#include <encoder_kit/prenorm_layer.hpp>

#include <encgraph/sdk/config.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace internvl {

// Defaults are transformers' InternVLVisionConfig / InternVLConfig defaults
// (InternViT-300M-448px and a Qwen2 text model), so a config.json that omits
// a key means what it means to transformers.
struct ModelConfig {
  int64_t hidden_size = 1024;
  int64_t num_hidden_layers = 24;
  int64_t num_attention_heads = 16;
  int64_t intermediate_size = 4096;
  int64_t image_size = 448;
  int64_t patch_size = 14;
  int64_t num_channels = 3;
  float layer_norm_eps = 1e-6f;
  bool rms_norm = false;            // norm_type "rms_norm" (InternViT-6B) instead of "layer_norm"
  bool use_qk_norm = false;         // RMSNorm over all of q and of k (InternViT-6B)
  bool attention_bias = false;      // q/k/v projections have biases
  bool use_mean_pooling = true;     // false: a final `layernorm` after the last layer
  int64_t text_hidden_size = 4096;  // text_config.hidden_size: the projector's output
  int64_t shuffle = 2;              // 1 / downsample_ratio: tokens merged per side
  int64_t feature_layer = -1;       // vision_feature_layer (hidden_states index)

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // The encoder layers' form: LayerNorm or RMSNorm, GELU (erf).
  encoder_kit::PreNormForm layer_form() const {
    return {hidden_size, intermediate_size, num_attention_heads, layer_norm_eps, rms_norm, false};
  }
  int64_t grid() const { return image_size / patch_size; }
  int64_t patches_per_tile() const { return grid() * grid(); }
  // The encoder's sequence per tile: the CLS token, then the patches.
  int64_t seq_per_tile() const { return patches_per_tile() + 1; }
  // Output rows of one tile after the pixel shuffle (256 for 448 / 14 / 2).
  int64_t rows_per_tile() const { return patches_per_tile() / (shuffle * shuffle); }
  int64_t shuffled_width() const { return hidden_size * shuffle * shuffle; }
  int64_t patch_values() const { return num_channels * patch_size * patch_size; }
  // Patch row columns rounded up to 8 (16-byte bf16 rows; 3*14*14 = 588 is not).
  int64_t patch_cols() const { return (patch_values() + 7) / 8 * 8; }
  // Encoder layers the configured feature layer needs.
  int64_t layers_to_run() const {
    return feature_layer >= 0 ? feature_layer : num_hidden_layers + 1 + feature_layer;
  }
  // The final layernorm runs only on the last layer's output with mean pooling off.
  bool uses_final_layernorm() const { return !use_mean_pooling && feature_layer == -1; }
  // Throws Error(INVALID_ARGUMENT) naming the inconsistent or out-of-range setting.
  void validate() const;
};

// GotOcr2ImageProcessor as InternVL's preprocessor_config.json sets it.
struct Processor {
  bool crop_to_patches = true;
  int64_t min_patches = 1;
  int64_t max_patches = 12;
  bool bilinear = false;  // resample 2; bicubic (3) otherwise
  // InternVL's released values (ImageNet's); a preprocessor_config.json
  // without them means GotOcr2's defaults (CLIP's) instead.
  std::array<double, 3> mean = {0.485, 0.456, 0.406};
  std::array<double, 3> std = {0.229, 0.224, 0.225};
  // Tiles one image can get: the grid's plus the thumbnail.
  int64_t max_tiles() const { return crop_to_patches && max_patches > 1 ? max_patches + 1 : 1; }
};

// An image side in pixels, checked before any size is computed from an item.
inline constexpr int64_t kMaxSide = int64_t{1} << 20;

using Dtype = encoder_kit::ComputeDtype;

struct Options : encoder_kit::RunOptions {
  ModelConfig model;
  Processor processor;
  std::string config_path;               // the config.json the sizes came from, or ""
  std::string weight_prefix = "model.";  // before vision_tower.* and multi_modal_projector.*
  Dtype dtype = Dtype::F32;
  // CUDA: the encoder layers' qkv, fc1 and fc2 in FP8 (docs/precision.md);
  // patch embedding, attention and the projector stay bf16.
  encoder_kit::Precision precision = encoder_kit::Precision::Bf16;
  int64_t max_budget_tiles = 32;  // the largest graph holds this many tiles
};

// Reads the plugin table's keys (see the plugin's header comment) and refuses
// any other; params.weights may name a checkpoint folder.
Options parse_options(encgraph::sdk::Config& config, const eg_create_params& params);
Options parse_options(const eg_create_params* params);

}  // namespace internvl
