// The GLM-4.1V / GLM-4.5V vision tower plugin ("glm4v"), as transformers'
// Glm4vVisionModel computes it (docs/models/glm4v.md): the shared tower
// (tower.hpp) over kGlm4v (spec.hpp). One output: "embeddings" (the merger's
// tokens, out_hidden_size wide). On CUDA: cuda_downsample_tower.cpp.
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json, model_type glm4v or glm4v_moe; its vision_config), depth,
// hidden_size, num_heads, intermediate_size (the merger's width),
// out_hidden_size (also the blocks' MLP width), patch_size,
// temporal_patch_size, spatial_merge_size, in_channels, image_size (the
// learned position grid is image_size / patch_size per side), attention_bias
// (each overrides config_json), dtype (f32 on the CPU, bf16 on CUDA),
// min_pixels, max_pixels (an image's two temporal copies together, as the
// processor counts them),
// video_min_pixels, video_max_pixels (all frames of a video together),
// min_budget, max_budget, max_frames_per_video, seed, tune_gemm, tuning_cache,
// check_finite.
#include "spec.hpp"
#include "tower.hpp"

namespace {

constexpr qwen_vl::sdk::Identity kIdentity{
    "glm4v", "1.0.0",
    "GLM-4.1V / GLM-4.5V vision tower (bicubic position embedding, 2-D rotary, downsample merger)",
    EG_MODALITY_IMAGE | EG_MODALITY_VIDEO, qwen_vl::kDevices};
using Glm4v = qwen_vl::VersionTower<qwen_vl::kGlm4v, kIdentity>;

}  // namespace

ENCGRAPH_SDK_PLUGIN(Glm4v)
