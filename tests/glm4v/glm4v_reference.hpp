// A float64 reference of the GLM-4.1V vision tower (transformers'
// Glm4vVisionModel) and its processor's patch layout, written separately from
// the plugin and as directly as transformers reads: the Conv3d patch
// embedding, post_conv_layernorm, Glm4vVisionEmbeddings' bicubic grid_sample
// of the learned grid at each patch centre (align_corners false, border
// padding) in rot_pos_emb's order, RMSNorm blocks with 2-D rotary and a
// SiLU-gated MLP out_hidden_size wide, post_layernorm, the downsample Conv2d
// over each merged unit, and Glm4vVisionPatchMerger.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace glm4v_ref {

struct Config {
  int64_t depth = 3, hidden = 48, heads = 4, inter = 80, out = 40;
  int64_t patch = 14, temporal = 2, merge = 2, pos_side = 5;
  bool attention_bias = false;
  double eps = 1e-5;  // rms_norm_eps
  int64_t head_dim() const { return hidden / heads; }
  int64_t patch_dim() const { return 3 * temporal * patch * patch; }
  int64_t image_size() const { return pos_side * patch; }
};

// The plugin's keys for this tower (pixel bounds that keep the test items
// unresized).
std::vector<std::pair<std::string, std::string>> plugin_config(const Config& c);

// A checkpoint folder's config.json (`model_type` glm4v or glm4v_moe) for `c`.
std::string config_json(const Config& c, const std::string& model_type);

using Params = std::map<std::string, std::vector<double>>;
// Parameters under `prefix` ("model.visual." as transformers 5 saves them),
// f32-representable.
Params random_params(const Config& c, uint64_t seed, const std::string& prefix);
void write_params(const Config& c, const Params& p, const std::filesystem::path& file,
                  const std::string& prefix);

struct Input {
  int64_t t, h, w;           // grid in patches
  std::vector<double> rows;  // processor-order patch rows [t*h*w, patch_dim]
};

// The processor's output for frames already sized to multiples of
// patch * merge (no resize): rescale, CLIP mean/std, time padding by the last
// frame (an image is its temporal_patch_size copies), the patch permute.
Input preprocess(const Config& c, const std::vector<uint8_t>& pixels, int64_t frames,
                 int64_t height, int64_t width);

// The tower on a batch: per item its [tokens, out] rows.
std::vector<std::vector<double>> forward(const Config& c, const Params& p,
                                         const std::vector<Input>& items,
                                         const std::string& prefix);

std::vector<uint8_t> random_pixels(int64_t frames, int64_t height, int64_t width, uint64_t seed);

}  // namespace glm4v_ref
