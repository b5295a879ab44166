// The tower's parameters as f32 host arrays, read by their checkpoint names
// (<weight_prefix>embeddings.*, encoder.layers.N.*, post_layernorm.*, head.*) or
// drawn at random. Only what the configured output needs is read: the layers
// up to the feature layer, post_layernorm unless a feature layer is taken, the
// head only for pooled output (VLM checkpoints often lack it). And the CPU
// forward over them.
#pragma once

#include "siglip_batch.hpp"
#include "siglip_config.hpp"

#include <encoder_kit/prenorm_layer.hpp>
#include <encoder_kit/weights.hpp>

#include <cstddef>
#include <vector>

namespace siglip {

using LayerWeights = encoder_kit::PreNormLayerWeights;  // LayerNorm, GELU (tanh)

// The multi-head attention pooling head. Its query is the learned probe, the
// same for every image, so its projection is computed once at load.
struct HeadWeights {
  std::vector<float> query;         // probe · W_q^T + b_q: [hidden]
  std::vector<float> kv_w, kv_b;    // in_proj rows for k and v: [2 hidden, hidden]
  std::vector<float> out_w, out_b;  // attention.out_proj
  std::vector<float> ln_w, ln_b;    // head.layernorm
  std::vector<float> fc1_w, fc1_b, fc2_w, fc2_b;
};

struct Weights {
  std::vector<float> patch_w;  // Conv2d [hidden, C, p, p] as [hidden, patch_cols], zero-padded
  std::vector<float> patch_b;  // [hidden]
  std::vector<float> pos;      // position_embedding [tokens_per_image, hidden]
  std::vector<LayerWeights> layers;         // layers_to_run() of them
  std::vector<float> post_ln_w, post_ln_b;  // empty with a feature layer
  HeadWeights head;                         // empty unless pooled
};

// Values in the parameters this configuration loads, an upper bound
// (checked arithmetic): every layer and the head.
int64_t parameter_count(const Options& o);

// Refuses a tower whose f32 weights exceed the machine's memory, then reads
// them. Random weights: matrices N(0, 1/fan_in) so activations keep their
// scale at any width, biases N(0, 0.02^2), norm weights N(1, 0.1^2) and biases
// N(0, 0.05^2), position embeddings N(0, 0.2^2), the probe N(0, 1): every
// parameter matters, so tests notice a wrong one.
Weights load_weights(const Options& o, const encoder_kit::WeightSource& source);

// The forward on the CPU in f32 (siglip_cpu_forward.cpp): what CI runs, and
// the CUDA path's reference. It reads the graph's buffers and writes each
// output asked for: every image's tokens, and/or one pooled row per image.
size_t cpu_workspace_bytes(const Options& o, const Capacity& cap);

// `buffers` in Buffer order; each output asked for, f32 (see OutputPtrs).
void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 const OutputPtrs& outputs, void* workspace, size_t workspace_bytes);

}  // namespace siglip
