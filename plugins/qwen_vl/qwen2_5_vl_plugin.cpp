// The Qwen2.5-VL vision tower plugin ("qwen2_5_vl"): the shared tower
// (tower.hpp) over kQwen2_5Vl (spec.hpp).
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json; its vision_config), depth, hidden_size, num_heads,
// intermediate_size, out_hidden_size, patch_size, temporal_patch_size,
// spatial_merge_size, window_size, fullatt_block_indexes, in_channels (each
// overrides config_json), dtype (f32 on the CPU, bf16 on CUDA), min_pixels,
// max_pixels, min_budget, max_budget, max_frames_per_video, seed, tune_gemm
// (CUDA: time product algorithms while capturing; default true), tuning_cache
// (CUDA: the folder tuned choices persist in, or "off"; docs/config.md),
// mlp_kernel (CUDA: "auto", "fused_norm", "fused" or "cublaslt"; config.hpp),
// qkv_kernel (CUDA: "auto", "fused_norm" or "cublaslt"; config.hpp),
// precision (CUDA: "bf16" or "fp8_linear"; config.hpp), check_finite (default true: NaN/Inf weights
// are an error). Size keys are bounded (see VisionConfig::validate).
#include "spec.hpp"
#include "tower.hpp"

namespace {

constexpr qwen_vl::sdk::Identity kIdentity{
    "qwen2_5_vl", "1.1.0", "Qwen2.5-VL vision tower (window attention, 2-D rotary, patch merger)",
    EG_MODALITY_IMAGE | EG_MODALITY_VIDEO, qwen_vl::kDevices};
using Qwen2_5Vl = qwen_vl::VersionTower<qwen_vl::kQwen2_5Vl, kIdentity>;

}  // namespace

ENCGRAPH_SDK_PLUGIN(Qwen2_5Vl)
