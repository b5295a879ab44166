// The Qwen3-VL vision tower plugin ("qwen3_vl"), as transformers'
// Qwen3VLVisionModel computes it (docs/models/qwen3_vl.md): the shared tower
// (tower.hpp) over kQwen3Vl (spec.hpp). Outputs (one forward):
// "pooler_output" (the merger's, primary) and "deepstack_0..n-1".
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json; its vision_config), depth, hidden_size, num_heads,
// intermediate_size, out_hidden_size, patch_size, temporal_patch_size,
// spatial_merge_size, in_channels, num_position_embeddings,
// deepstack_visual_indexes (each overrides config_json), dtype (f32 on the
// CPU, bf16 on CUDA), min_pixels, max_pixels (images), video_min_pixels,
// video_max_pixels (all frames of a video together), min_budget, max_budget,
// max_frames_per_video, seed, tune_gemm, tuning_cache, precision (CUDA: "bf16"
// or "fp8_linear"; docs/precision.md), check_finite.
#include "spec.hpp"
#include "tower.hpp"

namespace {

constexpr qwen_vl::sdk::Identity kIdentity{
    "qwen3_vl", "1.1.0",
    "Qwen3-VL vision tower (interpolated position embedding, 2-D rotary, deepstack outputs)",
    EG_MODALITY_IMAGE | EG_MODALITY_VIDEO, qwen_vl::kDevices};
using Qwen3Vl = qwen_vl::VersionTower<qwen_vl::kQwen3Vl, kIdentity>;

}  // namespace

ENCGRAPH_SDK_PLUGIN(Qwen3Vl)
