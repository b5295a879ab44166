// The tower's forward on the CPU in f32: the reference path and what CI runs.
// It reads the graph's buffers (see qwen_batch.hpp) and writes [tokens,
// out_hidden] rows in the processor's token order.
#pragma once

#include "qwen_config.hpp"
#include "qwen_layout.hpp"
#include "qwen_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>

namespace qwen {

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap);

// `buffers` in Buffer order; `output` [cap.tokens, out_hidden] f32.
void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* output, void* workspace, size_t workspace_bytes);

}  // namespace qwen
