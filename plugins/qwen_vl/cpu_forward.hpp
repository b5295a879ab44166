// The tower's forward on the CPU in f32: the reference path and what CI runs.
// It reads the graph's buffers (see batch.hpp) and writes every output
// ([tokens, out_hidden] each: the merger's, then any deepstack features in
// layer order) in batch token order.
#pragma once

#include "config.hpp"
#include "layout.hpp"
#include "weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>

namespace qwen_vl {

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap);

// `buffers` in Buffers order; `outputs`: 1 + num_deepstack() f32 arrays of
// [cap.tokens, out_hidden].
void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* const* outputs, void* workspace,
                 size_t workspace_bytes);

}  // namespace qwen_vl
