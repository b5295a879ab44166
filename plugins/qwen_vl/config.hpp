// A Qwen-VL vision tower's configuration (the `vision_config` of a
// checkpoint's config.json) and the plugin's own options, for every version
// (spec.hpp): a field another version's tower has keeps its default and is
// read by no key.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/config.hpp>

#include <encoder_kit/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace qwen_vl {

namespace sdk = encgraph::sdk;

struct Spec;

struct VisionConfig {
  const Spec* spec = nullptr;  // the version (set by Options and VisionConfig(spec))
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t out_hidden_size = 0;
  int64_t patch_size = 0;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t in_channels = 3;
  // Attention::Windowed: a window's side in pixels, and the blocks that attend
  // over whole temporal patches instead.
  int64_t window_size = 0;
  std::vector<int64_t> fullatt_block_indexes;
  // PosEmbed::Interpolated / Bicubic: entries of the learned grid (N x N;
  // GLM-4.1V's config.json says image_size, N = image_size / patch_size).
  int64_t num_position_embeddings = 0;
  // The qkv product has a bias (config.json's attention_bias; GLM-4.1V).
  bool attention_bias = true;
  // Outputs::Deepstack: the blocks whose output a deepstack merger turns into
  // an output of its own.
  std::vector<int64_t> deepstack_visual_indexes;
  // The blocks' norms (fixed in Qwen's model code; GLM-4.1V's rms_norm_eps).
  float norm_eps = 1e-6f;

  VisionConfig() = default;
  explicit VisionConfig(const Spec& s);  // the version's defaults

  int64_t head_dim() const { return hidden_size / num_heads; }
  // The blocks' MLP width (Spec::mlp_out_width).
  int64_t mlp_width() const;
  // Values of one flattened patch: channels x temporal x patch x patch.
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  // Patches merged into one output token.
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Pixels per side of one merged unit (28 or 32): the resize factor.
  int64_t resize_factor() const { return patch_size * spatial_merge_size; }
  // A window's side in merged units (4 for Qwen2.5-VL's towers); 0 without windows.
  int64_t window_units() const;
  // Whether block `block` attends over whole temporal patches.
  bool full_attention(int64_t block) const;
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

// Item bounds checked before any size is computed from an item: a side in
// pixels, and patch values (patches x patch_dim) per item, which also keeps
// patch offsets inside the int32 sequence tables.
inline constexpr int64_t kMaxSide = int64_t{1} << 20;
inline constexpr int64_t kMaxItemValues = int64_t{1} << 31;

// How norm2 and the MLP's gate/up product with SiLU·mul run on CUDA.
// "fused": the norm, then our Hopper kernel with SiLU·mul in its epilogue
// (needs compute capability 9.0); "fused_norm": that kernel with the norm
// inside (rms_gate_up_silu_mul_bf16; the same GPUs); "cublaslt": the norm,
// cuBLASLt's product, then the SiLU·mul pass; "auto": per graph size the
// fastest of the three as timed in the tuning warm-up where the fused kernel
// runs (without tuning: "fused_norm").
// (parse_options reads the key by these names, in this order; default first)
enum class MlpKernel { Auto, Fused, FusedNorm, Cublaslt };
// How norm1 and the qkv product run on CUDA. "fused_norm": our Hopper kernel
// with the norm inside (rms_linear_bf16; compute capability 9.0); "cublaslt":
// the norm, then cuBLASLt's product; "auto": per graph size the faster of the
// two as timed in the tuning warm-up where the kernel runs (without tuning:
// "cublaslt").
// (read by these names, in this order)
enum class QkvKernel { Auto, FusedNorm, Cublaslt };

// The CUDA forwards' blocks (Qwen2.5-VL, Qwen3-VL) run their qkv, proj and
// MLP products in this precision; the patch embedding, attention, norms and
// mergers stay bf16.
using encoder_kit::Precision;

struct Options : encoder_kit::RunOptions {
  explicit Options(const Spec& s);  // the version's defaults
  const Spec& spec() const { return *model.spec; }

  VisionConfig model;
  // The config.json the tower's sizes came from (config_json, or the one in
  // the checkpoint folder plugin.weights names), or "" for keys and defaults.
  std::string config_path;
  Dtype dtype = Dtype::F32;
  // Images: the released preprocessor_config.json's bounds.
  int64_t min_pixels = 0;
  int64_t max_pixels = 0;
  // Videos under VideoPixels::AllFrames: bounds on all frames together.
  int64_t video_min_pixels = 0;
  int64_t video_max_pixels = 0;
  int64_t min_budget = 64;  // a 224x224 image (Qwen2.5-VL)
  int64_t max_budget = 0;   // 0: the tokens of a max_pixels image
  int64_t max_frames_per_video = 768;
  // CUDA, Mlp::GatedSilu towers: how the MLP's gate/up product and SiLU·mul
  // run (the mlp_kernel key), and norm1 with the qkv product (qkv_kernel).
  MlpKernel mlp_kernel = MlpKernel::Auto;
  QkvKernel qkv_kernel = QkvKernel::Auto;
  Precision precision = Precision::Bf16;
};

// Reads the plugin table's keys (the version's: see its plugin file) and
// refuses any other; `params.device` picks the default dtype (bf16 on CUDA,
// f32 on the CPU).
Options parse_options(const Spec& spec, sdk::Config& config, const eg_create_params& params);
// The same over a reader of its own (tests).
Options parse_options(const Spec& spec, const eg_create_params* params);

}  // namespace qwen_vl
