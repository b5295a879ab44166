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

}  // namespace

const Spec kQwen2_5Vl{Forms{Attention::Windowed, PosEmbed::None, Outputs::Merger, Norm::Rms,
                            Mlp::GatedSilu, VideoPixels::PerFrame, /*patch_bias=*/false},
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
          VideoPixels::AllFrames, /*patch_bias=*/true},
    Checkpoint{
        {"qwen3_vl", "qwen3_vl_moe"}, "gelu_pytorch_tanh", {"norm", "linear_fc1", "linear_fc2"}},
    // IMAGENET_STANDARD_MEAN / _STD; the released preprocessor_config.json's
    // size (shortest_edge / longest_edge, checked in docs/models/qwen3_vl.md);
    // videos: Qwen3VLVideoProcessor's size.
    Processor{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, 65536, 16777216, 128 * 32 * 32, 32 * 32 * 768},
    "qwen3_vl", "Qwen3-VL", 0x51a8u, /*rotary_freq_f64=*/false, qwen3_tower()};

}  // namespace qwen_vl
