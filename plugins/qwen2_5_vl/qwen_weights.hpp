// The tower's parameters as f32 host arrays, read by their checkpoint names
// (visual.*) or drawn at random. Both device paths start from these.
#pragma once

#include "qwen_config.hpp"

#include <encoder_kit/weights.hpp>

#include <vector>

namespace qwen {

struct BlockWeights {
  std::vector<float> norm1, norm2;                // [hidden]
  std::vector<float> qkv_w, qkv_b;                // [3 hidden, hidden], [3 hidden]
  std::vector<float> proj_w, proj_b;              // [hidden, hidden], [hidden]
  std::vector<float> gate_w, gate_b, up_w, up_b;  // [inter, hidden], [inter]
  std::vector<float> down_w, down_b;              // [hidden, inter], [hidden]
};

struct Weights {
  std::vector<float> patch_embed;  // Conv3d [hidden, 3, 2, 14, 14] as [hidden, patch_dim]
  std::vector<BlockWeights> blocks;
  std::vector<float> ln_q;            // [hidden]
  std::vector<float> mlp0_w, mlp0_b;  // [4 hidden, 4 hidden], [4 hidden]
  std::vector<float> mlp2_w, mlp2_b;  // [out, 4 hidden], [out]
};

// Values in the tower's parameters (checked arithmetic).
int64_t parameter_count(const VisionConfig& c);

// Refuses a tower whose f32 weights exceed the machine's memory, then reads
// them. Random weights: matrices N(0, 1/fan_in) so activations keep their scale at
// any width, biases N(0, 0.02^2), norm weights N(1, 0.1^2): every parameter
// matters, so tests notice a wrong one.
Weights load_weights(const VisionConfig& c, const encoder_kit::WeightSource& source);

}  // namespace qwen
