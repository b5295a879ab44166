// The Qwen3-VL vision tower's configuration (the `vision_config` of a
// checkpoint's config.json) and the plugin's own options.
#pragma once

#include <encgraph/plugin_api.h>

#include <encoder_kit/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace qwen3 {

struct VisionConfig {
  // Defaults: Qwen3VLVisionConfig's (transformers).
  int64_t depth = 27;
  int64_t hidden_size = 1152;
  int64_t num_heads = 16;
  int64_t intermediate_size = 4304;
  int64_t out_hidden_size = 3584;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t in_channels = 3;
  int64_t num_position_embeddings = 2304;  // a 48 x 48 grid
  std::vector<int64_t> deepstack_visual_indexes = {8, 16, 24};
  float layer_norm_eps = 1e-6f;  // fixed in the released model code

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Values of one flattened patch: channels x temporal x patch x patch.
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  // Patches merged into one output token.
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Pixels per side of one merged unit (32): the resize factor.
  int64_t resize_factor() const { return patch_size * spatial_merge_size; }
  // Side of the learned position-embedding grid.
  int64_t pos_grid() const;
  int64_t num_deepstack() const { return static_cast<int64_t>(deepstack_visual_indexes.size()); }
  // The output slot (0-based among the deepstack outputs, layer order) of
  // block `layer`'s deepstack feature, or -1.
  int64_t deepstack_slot(int64_t layer) const;
  // The merger of deepstack output `slot`: deepstack_merger_list index.
  int64_t deepstack_merger(int64_t slot) const;
  // Throws Error(INVALID_ARGUMENT) naming the inconsistent or out-of-range setting.
  void validate() const;
};

using Dtype = encoder_kit::ComputeDtype;

// Item bounds checked before any size is computed from an item.
inline constexpr int64_t kMaxSide = int64_t{1} << 20;
inline constexpr int64_t kMaxItemValues = int64_t{1} << 31;

struct Options {
  VisionConfig model;
  // The config.json the tower's sizes came from (config_json, or the one in
  // the checkpoint folder plugin.weights names), or "" for keys and defaults.
  std::string config_path;
  Dtype dtype = Dtype::F32;
  // Images: the released preprocessor_config.json's size (shortest_edge /
  // longest_edge), checked in docs/models/qwen3_vl.md.
  int64_t min_pixels = 65536;
  int64_t max_pixels = 16777216;
  // Videos: Qwen3VLVideoProcessor's size; bounds on all frames together.
  int64_t video_min_pixels = 128 * 32 * 32;
  int64_t video_max_pixels = 32 * 32 * 768;
  int64_t min_budget = 64;
  int64_t max_budget = 0;  // 0: the tokens of a max_pixels image
  int64_t max_frames_per_video = 768;
  uint64_t seed = 0;
  bool check_finite = true;
  bool tune_gemm = true;  // CUDA: time the products' algorithms in each capture's warm-up
  // CUDA: where tuned product algorithms persist between runs (keyed by GPU,
  // library versions and shapes): a folder, "off", or "" for the default
  // ($ENCGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/encgraph, else ~/.cache/encgraph).
  std::string tuning_cache;
};

Options parse_options(const eg_create_params* params);

}  // namespace qwen3
