#include "spec.hpp"

namespace qwen_vl {
namespace {

VisionConfig qwen2_5_tower() {  // the 7B tower
  VisionConfig c;
  c.depth = 32;
  c.hidden_size = 1280;
  c.num_heads = 16;
  c.intermediate_size = 3420;
  c.out_hidden_size = 3584;
  c.patch_size = 14;
  c.window_size = 112;
  c.fullatt_block_indexes = {7, 15, 23, 31};
  return c;
}

VisionConfig qwen3_tower() {  // Qwen3VLVisionConfig's defaults (transformers)
  VisionConfig c;
  c.depth = 27;
  c.hidden_size = 1152;
  c.num_heads = 16;
  c.intermediate_size = 4304;
  c.out_hidden_size = 3584;
  c.patch_size = 16;
  c.num_position_embeddings = 2304;  // a 48 x 48 grid
  c.deepstack_visual_indexes = {8, 16, 24};
  return c;
}

}  // namespace

const Spec kQwen2_5Vl{
    .name = "qwen2_5_vl",
    .title = "Qwen2.5-VL",
    .attention = Attention::Windowed,
    .pos_embed = PosEmbed::None,
    .outputs = Outputs::Merger,
    .norm = Norm::Rms,
    .mlp = Mlp::GatedSilu,
    .video_pixels = VideoPixels::PerFrame,
    .patch_bias = false,
    .merger_parts = {"ln_q", "mlp.0", "mlp.2"},
    .model_types = {"qwen2_5_vl", nullptr},
    .hidden_act = "silu",
    // OPENAI_CLIP_MEAN / OPENAI_CLIP_STD, the processor's defaults.
    .image_mean = {0.48145466, 0.4578275, 0.40821073},
    .image_std = {0.26862954, 0.26130258, 0.27577711},
    .synthetic_stream = 0x51a7u,
    .rotary_freq_f64 = true,
    .tower = qwen2_5_tower(),
    // The released preprocessor_config.json.
    .min_pixels = 56 * 56,
    .max_pixels = 28 * 28 * 16384,
    .video_min_pixels = 0,
    .video_max_pixels = 0,
};

const Spec kQwen3Vl{
    .name = "qwen3_vl",
    .title = "Qwen3-VL",
    .attention = Attention::Full,
    .pos_embed = PosEmbed::Interpolated,
    .outputs = Outputs::Deepstack,
    .norm = Norm::Layer,
    .mlp = Mlp::GeluTanh,
    .video_pixels = VideoPixels::AllFrames,
    .patch_bias = true,
    .merger_parts = {"norm", "linear_fc1", "linear_fc2"},
    .model_types = {"qwen3_vl", "qwen3_vl_moe"},
    .hidden_act = "gelu_pytorch_tanh",
    // IMAGENET_STANDARD_MEAN / _STD, the released processors' values.
    .image_mean = {0.5, 0.5, 0.5},
    .image_std = {0.5, 0.5, 0.5},
    .synthetic_stream = 0x51a8u,
    .rotary_freq_f64 = false,
    .tower = qwen3_tower(),
    // The released preprocessor_config.json's size (shortest_edge / longest_edge),
    // checked in docs/models/qwen3_vl.md; videos: Qwen3VLVideoProcessor's size.
    .min_pixels = 65536,
    .max_pixels = 16777216,
    .video_min_pixels = 128 * 32 * 32,
    .video_max_pixels = 32 * 32 * 768,
};

}  // namespace qwen_vl
