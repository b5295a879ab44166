// The SigLIP vision tower's configuration (a SiglipVisionConfig: the
// `vision_config` of a checkpoint's config.json) and the plugin's own options:
// what to output, where the weights live inside the checkpoint, budgets.
#pragma once

#include <encgraph/plugin_api.h>

#include <encoder_kit/config.hpp>
#include <encoder_kit/prenorm_layer.hpp>

#include <encgraph/sdk/config.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace siglip {

// Defaults are transformers' SiglipVisionConfig defaults (siglip-base-patch16-224),
// so a config.json that omits a key means what it means to transformers.
struct VisionConfig {
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  float layer_norm_eps = 1e-6f;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // The encoder layers' form: LayerNorm, GELU (tanh).
  encoder_kit::PreNormForm layer_form() const {
    return {hidden_size, intermediate_size, num_attention_heads, layer_norm_eps, false, true};
  }
  // Patches per side; the Conv2d drops the last image_size % patch_size pixels.
  int64_t grid() const { return image_size / patch_size; }
  // Every image is resized to image_size, so every image has this many tokens.
  int64_t tokens_per_image() const { return grid() * grid(); }
  // Values of one flattened patch (the Conv2d's receptive field): C x p x p.
  int64_t patch_values() const { return num_channels * patch_size * patch_size; }
  // Columns of a patch row as stored: patch_values rounded up to 8, so bf16
  // rows are 16-byte multiples (cuBLASLt's fast kernels need that; 3*14*14 =
  // 588 is not). The extra columns are zero in pixels and weights alike.
  int64_t patch_cols() const { return (patch_values() + 7) / 8 * 8; }
  // Throws Error(INVALID_ARGUMENT) naming the inconsistent or out-of-range setting.
  void validate() const;
};

// An image side in pixels, checked before any size is computed from an item.
inline constexpr int64_t kMaxSide = int64_t{1} << 20;

enum class Output {
  LastHiddenState,  // [tokens, hidden] per image: post_layernorm(encoder(x)), or the feature layer
  Pooled,           // [1, hidden] per image: the attention-pooling head
};
// The name model_info declares for an output ("last_hidden_state", "pooled").
const char* output_name(Output output);
using Dtype = encoder_kit::ComputeDtype;

struct Options : encoder_kit::RunOptions {
  VisionConfig model;
  // The config.json the tower's sizes came from (config_json, or the one in
  // the checkpoint folder plugin.weights names), or "" for keys and defaults.
  std::string config_path;
  // What one forward writes, in declared order; outputs[0] is the primary
  // output, whose rows the budgets count (`output = "..."` gives one,
  // `outputs = ["...", "..."]` several).
  std::vector<Output> outputs = {Output::LastHiddenState};
  // hidden_states[feature_layer] as transformers numbers them (0: the
  // embeddings, k: after k layers, negative: from the end, -1 the last layer),
  // without post_layernorm: what LLaVA-style VLMs feed their projector.
  std::optional<int64_t> feature_layer;
  std::string weight_prefix = "vision_model.";
  Dtype dtype = Dtype::F32;
  // CUDA: the layers' q/k/v, out_proj, fc1 and fc2 in FP8 ("fp8_linear"); the
  // embeddings, attention, norms and the pooling head stay bf16.
  encoder_kit::Precision precision = encoder_kit::Precision::Bf16;
  int64_t max_budget_images = 64;  // the largest graph holds this many images
  bool bilinear_resize = false;    // the processor resamples bicubic by default

  int64_t layers_to_run() const;
  bool uses_post_layernorm() const { return !feature_layer.has_value(); }
  // Whether the forward writes this output (the pooling head runs only then).
  bool has(Output output) const;
  // Whether budgets count images (the primary output is pooled) rather than tokens.
  bool pooled() const { return outputs.front() == Output::Pooled; }
  bool needs_head() const { return has(Output::Pooled); }
  // Rows one image gets in `output`.
  int64_t rows_of(Output output) const {
    return output == Output::Pooled ? 1 : model.tokens_per_image();
  }
  // Result rows of one image in the primary output; budgets count these.
  int64_t rows_per_image() const { return rows_of(outputs.front()); }
};

// Reads the plugin table's keys (see the plugin's header comment) and refuses
// any other; params.device picks the default dtype (bf16 on CUDA, f32 on the
// CPU), params.weights may name a checkpoint folder.
Options parse_options(encgraph::sdk::Config& config, const eg_create_params& params);
// The same from raw params alone (the tests' entry).
Options parse_options(const eg_create_params* params);

}  // namespace siglip
