// The encoder's parameters as f32 host arrays: the SigLIP tower through
// plugins/siglip's loader (<prefix>vision_tower.vision_model.*), the
// projector (<prefix>multi_modal_projector.linear_1/2.*) and
// <prefix>image_newline, read by transformers' names or drawn at random; and
// the CPU forward over them.
#pragma once

#include "llava_batch.hpp"
#include "llava_config.hpp"
#include "siglip_weights.hpp"

#include <encoder_kit/weights.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace llava_onevision {

struct Weights {
  siglip::Options tower_options;  // the tower as loaded (its prefix resolved)
  siglip::Weights tower;
  std::vector<float> proj1_w, proj1_b;  // linear_1: [text_hidden, hidden]; zero bias without
  std::vector<float> proj2_w, proj2_b;  // linear_2: [text_hidden, text_hidden]
  std::vector<float> newline;           // image_newline: [text_hidden]
};

// The checkpoint's prefix: o.weight_prefix, or for "auto" "model." when the
// source holds model.image_newline (transformers 5), else "" when it holds
// image_newline (the released llava-hf files), else "model.".
std::string resolve_prefix(const Options& o, const encoder_kit::WeightSource& source);

// Refuses weights over the machine's memory, then reads them. Random weights:
// matrices N(0, 1/fan_in), biases N(0, 0.02^2), the newline N(0, 1/text_hidden).
Weights load_weights(const Options& o, const encoder_kit::WeightSource& source);

size_t cpu_workspace_bytes(const Options& o, const Weights& w, const Capacity& cap);
// `buffers` in Buffer order; writes [cap.out_rows, text_hidden_size] f32
// (rows past the batch's plan are zero).
void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 float* output, void* workspace, size_t workspace_bytes);

}  // namespace llava_onevision
