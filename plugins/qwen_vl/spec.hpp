// What tells one Qwen-VL-family vision tower from another. The plugins
// (qwen2_5_vl, qwen3_vl, glm4v) run the same code over a Spec: the patch
// embedding, the position handling, the block (norm, attention, MLP), the
// merger and the outputs each pick their form from it, as transformers'
// Qwen3-VL and GLM-4.1V build on Qwen2-VL's blocks.
#pragma once

#include "config.hpp"

#include <array>
#include <cstdint>

namespace qwen_vl {

// Which blocks attend over windows: Windowed, windows of window_size pixels
// except in fullatt_block_indexes (rows are kept in window order); Full, every
// block over whole temporal patches (rows in the processor's order).
enum class Attention { Windowed, Full };
// None: rotary only; Interpolated: a learned N x N grid, bilinearly resized to
// each item's grid and added after the patch embedding; Bicubic: a learned
// N x N grid sampled at each patch's centre by bicubic grid_sample
// (align_corners false, border padding: 16 taps), added after the patch
// embedding and its norm (GLM-4.1V's Glm4vVisionEmbeddings).
enum class PosEmbed { None, Interpolated, Bicubic };
// Merger: one output; Deepstack: the merger's, then one deepstack merger's per
// deepstack_visual_indexes entry (postshuffle LayerNorm); Downsample: a
// post-block RMSNorm, a Conv2d over each merged unit (kernel = stride =
// spatial_merge_size) to out_hidden_size, then GLM's merger (a bias-free
// Linear, LayerNorm, erf GELU, a SiLU-gated MLP intermediate_size wide).
enum class Outputs { Merger, Deepstack, Downsample };
// RMSNorm (weight only) or LayerNorm (weight and bias), blocks and merger alike.
enum class Norm { Rms, Layer };
// GatedSilu: down(silu(gate(x)) * up(x)); GeluTanh: fc2(gelu_tanh(fc1(x))).
enum class Mlp { GatedSilu, GeluTanh };
// How a video is resized: PerFrame, each frame as an image (min/max_pixels);
// AllFrames, the video processor's bounds on every frame together
// (video_min_pixels / video_max_pixels), and fewer frames than one temporal
// patch refused.
enum class VideoPixels { PerFrame, AllFrames };
// How an image is resized: Alone, the image processor's own bounds on its
// pixels; AsTemporalPatch, the video rule over temporal_patch_size copies of
// it (GLM-4.1V's processor: the bounds count both copies, a side under the
// factor is scaled up first).
enum class ImagePixels { Alone, AsTemporalPatch };

// The blocks' forms.
struct Forms {
  Attention attention;
  PosEmbed pos_embed;
  Outputs outputs;
  Norm norm;
  Mlp mlp;
  VideoPixels video_pixels;
  bool patch_bias;  // the patch embedding's Conv3d has a bias
  ImagePixels image_pixels;
  bool post_conv_norm;  // a norm right after the patch embedding
  // The attention's output product and the blocks' MLP have biases (the qkv
  // product's is VisionConfig::attention_bias).
  bool block_biases;
  // The blocks' MLP is out_hidden_size wide (GLM-4.1V; intermediate_size is
  // then its merger's width), else intermediate_size.
  bool mlp_out_width;
};

// What a checkpoint folder holds: config.json's model_type values accepted
// (the second may be null) and vision_config's hidden_act; the main merger's
// norm, fc1 and fc2 tensor names (under "merger.").
struct Checkpoint {
  const char* model_types[2];
  const char* hidden_act;
  const char* merger_parts[3];
};

// The processor: normalisation per RGB channel, and the released pixel
// bounds of images and (VideoPixels::AllFrames) of a video's frames together.
struct Processor {
  std::array<double, 3> image_mean, image_std;
  int64_t min_pixels, max_pixels;
  int64_t video_min_pixels, video_max_pixels;
};

struct Spec : Forms, Checkpoint, Processor {
  const char* name;   // the plugin's name; leads every message
  const char* title;  // the model's name in messages ("Qwen2.5-VL")
  // encoder_kit::uniform01's stream for synthetic items' pixels.
  uint64_t synthetic_stream;
  // Rotary inverse frequencies computed in double then rounded (true), or in
  // float (false): each plugin's tables as they have always been, so graphs
  // and references keep their last bits.
  bool rotary_freq_f64;
  VisionConfig tower;  // the default sizes (keys and config.json override them)
};

// Qwen2.5-VL: window attention, 2-D rotary, RMSNorm, SiLU-gated MLP, one merger.
extern const Spec kQwen2_5Vl;
// Qwen3-VL: full attention, interpolated position embedding, LayerNorm, tanh
// GELU MLP, deepstack outputs.
extern const Spec kQwen3Vl;
// GLM-4.1V / GLM-4.5V: full attention, a norm after the patch embedding,
// bicubic position embedding, RMSNorm, SiLU-gated MLP out_hidden_size wide,
// downsample Conv2d and GLM's merger.
extern const Spec kGlm4v;

}  // namespace qwen_vl
