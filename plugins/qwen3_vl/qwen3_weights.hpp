// The tower's parameters as f32 host arrays, read by their checkpoint names
// (`visual.*` or `model.visual.*`, detected) or drawn at random. Both device
// paths start from these.
#pragma once

#include "qwen3_config.hpp"

#include <encoder_kit/weights.hpp>

#include <string>
#include <vector>

namespace qwen3 {

struct BlockWeights {
  std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b;  // [hidden]
  std::vector<float> qkv_w, qkv_b;                        // [3 hidden, hidden], [3 hidden]
  std::vector<float> proj_w, proj_b;                      // [hidden, hidden], [hidden]
  std::vector<float> fc1_w, fc1_b;                        // [inter, hidden], [inter]
  std::vector<float> fc2_w, fc2_b;                        // [hidden, inter], [hidden]
};

// Qwen3VLVisionPatchMerger: norm over [hidden] (main merger) or [4 hidden]
// (deepstack mergers, use_postshuffle_norm), then fc1, erf GELU, fc2.
struct MergerWeights {
  std::vector<float> norm_w, norm_b;  // [hidden] or [4 hidden]
  std::vector<float> fc1_w, fc1_b;    // [4 hidden, 4 hidden], [4 hidden]
  std::vector<float> fc2_w, fc2_b;    // [out, 4 hidden], [out]
};

struct Weights {
  std::vector<float> patch_embed_w;  // Conv3d [hidden, 3, 2, 16, 16] as [hidden, patch_dim]
  std::vector<float> patch_embed_b;  // [hidden]
  std::vector<float> pos_embed;      // [num_position_embeddings, hidden]
  std::vector<BlockWeights> blocks;
  MergerWeights merger;
  std::vector<MergerWeights> deepstack;  // deepstack_merger_list, in config-list order
  std::string prefix;                    // "visual." or "model.visual." (random: "visual.")
};

int64_t parameter_count(const VisionConfig& c);

// Random weights: matrices N(0, 1/fan_in), biases N(0, 0.02^2), norm weights
// N(1, 0.1^2), norm biases N(0, 0.1^2), pos_embed N(0, 0.5^2): every parameter
// matters, so tests notice a wrong one.
Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& source);

}  // namespace qwen3
