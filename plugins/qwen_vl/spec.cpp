#include "spec.hpp"

namespace qwen_vl {
namespace {

// The sizes every version's tower has (the rest keep VisionConfig's defaults).
VisionConfig sizes(int64_t depth, int64_t hidden, int64_t heads, int64_t inter, int64_t out,
                   int64_t patch) {
  VisionConfig c;
  c.depth = depth;
  c.hidden_size = hidden;
  c.num_heads = heads;
  c.intermediate_size = inter;
  c.out_hidden_size = out;
  c.patch_size = patch;
  return c;
}

VisionConfig qwen2_5_tower() {  // the 7B tower
  VisionConfig c = sizes(32, 1280, 16, 3420, 3584, 14);
  c.window_size = 112;
  c.fullatt_block_indexes = {7, 15, 23, 31};
  return c;
}

VisionConfig qwen3_tower() {  // Qwen3VLVisionConfig's defaults (transformers)
  VisionConfig c = sizes(27, 1152, 16, 4304, 3584, 16);
  c.num_position_embeddings = 2304;  // a 48 x 48 grid
  c.deepstack_visual_indexes = {8, 16, 24};
  return c;
}

VisionConfig glm4v_tower() {  // Glm4vVisionConfig's defaults (transformers): GLM-4.1V-9B
  VisionConfig c = sizes(24, 1536, 12, 13696, 4096, 14);
  c.num_position_embeddings = 576;  // image_size 336 / patch_size 14 = a 24 x 24 grid
  c.attention_bias = false;
  c.norm_eps = 1e-5f;  // rms_norm_eps
  return c;
}

}  // namespace

const Spec kQwen2_5Vl{Forms{Attention::Windowed, PosEmbed::None, Outputs::Merger, Norm::Rms,
                            Mlp::GatedSilu, VideoPixels::PerFrame, /*patch_bias=*/false,
                            ImagePixels::Alone, /*post_conv_norm=*/false, /*block_biases=*/true,
                            /*mlp_out_width=*/false},
                      Checkpoint{{"qwen2_5_vl", nullptr}, "silu", {"ln_q", "mlp.0", "mlp.2"}},
                      // OPENAI_CLIP_MEAN / OPENAI_CLIP_STD; the released preprocessor_config.json
                      // (videos are resized frame by frame).
                      Processor{{0.48145466, 0.4578275, 0.40821073},
                                {0.26862954, 0.26130258, 0.27577711},
                                56 * 56,
                                28 * 28 * 16384,
                                0,
                                0},
                      "qwen2_5_vl", "Qwen2.5-VL", 0x51a7u, /*rotary_freq_f64=*/true,
                      qwen2_5_tower()};

const Spec kQwen3Vl{
    Forms{Attention::Full, PosEmbed::Interpolated, Outputs::Deepstack, Norm::Layer, Mlp::GeluTanh,
          VideoPixels::AllFrames, /*patch_bias=*/true, ImagePixels::Alone,
          /*post_conv_norm=*/false, /*block_biases=*/true, /*mlp_out_width=*/false},
    Checkpoint{
        {"qwen3_vl", "qwen3_vl_moe"}, "gelu_pytorch_tanh", {"norm", "linear_fc1", "linear_fc2"}},
    // IMAGENET_STANDARD_MEAN / _STD; the released preprocessor_config.json's
    // size (shortest_edge / longest_edge, checked in docs/models/qwen3_vl.md);
    // videos: Qwen3VLVideoProcessor's size.
    Processor{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, 65536, 16777216, 128 * 32 * 32, 32 * 32 * 768},
    "qwen3_vl", "Qwen3-VL", 0x51a8u, /*rotary_freq_f64=*/false, qwen3_tower()};

const Spec kGlm4v{
    Forms{Attention::Full, PosEmbed::Bicubic, Outputs::Downsample, Norm::Rms, Mlp::GatedSilu,
          VideoPixels::AllFrames, /*patch_bias=*/true, ImagePixels::AsTemporalPatch,
          /*post_conv_norm=*/true, /*block_biases=*/false, /*mlp_out_width=*/true},
    // glm4v_moe (GLM-4.5V) reuses the same vision class (Glm4vMoeVisionModel).
    Checkpoint{{"glm4v", "glm4v_moe"}, "silu", {"post_projection_norm", "gate_proj", "down_proj"}},
    // OPENAI_CLIP_MEAN / _STD; Glm4vImageProcessor's size (shortest_edge
    // 112 * 112, longest_edge 28 * 28 * 15000, both counting the image's two
    // temporal copies) and Glm4vVideoProcessor's (longest_edge 28 * 28 * 2 *
    // 30000); a checkpoint folder's preprocessor configs override them.
    Processor{{0.48145466, 0.4578275, 0.40821073},
              {0.26862954, 0.26130258, 0.27577711},
              112 * 112,
              28 * 28 * 15000,
              112 * 112,
              28 * 28 * 2 * 30000},
    "glm4v", "GLM-4.1V", 0x61a4u, /*rotary_freq_f64=*/false, glm4v_tower()};

}  // namespace qwen_vl
