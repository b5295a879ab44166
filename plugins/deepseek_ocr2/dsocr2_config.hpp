// DeepSeek-OCR-2's vision-side configuration (docs/models/deepseek_ocr2.md):
// the SAM ViT, its neck and downsampling convolutions, the Qwen2-style encoder,
// the projector and the processor's view sizes; and the plugin's own options.
#pragma once

#include <encgraph/plugin_api.h>

#include <encoder_kit/config.hpp>

#include <encgraph/sdk/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dsocr2 {

struct ModelConfig {
  // SAM ViT-B (DeepseekOcr2SamVisionConfig defaults = the released sizes).
  int64_t patch_size = 16;
  int64_t sam_image_size = 1024;  // pos_embed covers sam_image_size / patch_size per side
  int64_t sam_hidden_size = 768;
  int64_t sam_layers = 12;
  int64_t sam_heads = 12;
  int64_t sam_mlp_dim = 3072;
  int64_t window_size = 14;
  std::vector<int64_t> global_attn_indexes = {2, 5, 8, 11};
  int64_t neck_channels = 256;
  std::vector<int64_t> downsample_channels = {512, 896};  // [1] is the encoder's width
  // The Qwen2-style encoder (convert_deepseek_ocr2_weights_to_hf.py's encoder_config).
  int64_t encoder_layers = 24;
  int64_t encoder_heads = 14;
  int64_t encoder_kv_heads = 2;
  int64_t encoder_intermediate_size = 4864;
  double rope_theta = 1000000.0;
  // The projector's output: the language model's hidden size.
  int64_t text_hidden_size = 1280;
  // DeepseekOcr2ImageProcessor: global view side, crop side, crop count bounds.
  int64_t global_size = 1024;
  int64_t tile_size = 768;
  int64_t min_crops = 2;
  int64_t max_crops = 6;

  int64_t encoder_hidden() const { return downsample_channels[1]; }
  int64_t sam_head_dim() const { return sam_hidden_size / sam_heads; }
  int64_t encoder_head_dim() const { return encoder_hidden() / encoder_heads; }
  int64_t pos_grid() const { return sam_image_size / patch_size; }
  bool is_global_layer(int64_t layer) const;
  // Patches per side of a view of `side` pixels, and its output (query) rows:
  // the two stride-2 convolutions give ceil(ceil(g/2)/2) per side.
  int64_t grid(int64_t side) const { return side / patch_size; }
  int64_t view_tokens(int64_t side) const;
  int64_t global_tokens() const { return view_tokens(global_size); }
  int64_t local_tokens() const { return view_tokens(tile_size); }
  // Throws Error(INVALID_ARGUMENT) naming the inconsistent or out-of-range setting.
  void validate() const;
};

using Dtype = encoder_kit::ComputeDtype;

inline constexpr int64_t kMaxSide = int64_t{1} << 15;  // an image side, in pixels

struct Options : encoder_kit::RunOptions {
  ModelConfig model;
  std::string config_path;  // the config.json the sizes came from, or ""
  Dtype dtype = Dtype::F32;
  int64_t min_budget = 0;  // 0: one global view's tokens
  int64_t max_budget = 0;  // 0: 8 global views' tokens
};

// Reads the plugin table's keys (see the plugin's header comment) and refuses
// any other; params.device picks the default dtype, params.weights may name a
// checkpoint folder.
Options parse_options(encgraph::sdk::Config& config, const eg_create_params& params);
// The same from raw params alone (the tests' entry).
Options parse_options(const eg_create_params* params);

}  // namespace dsocr2
