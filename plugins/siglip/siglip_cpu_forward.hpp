// The tower's forward on the CPU in f32: what CI runs, and the CUDA path's
// reference. It reads the graph's buffers (siglip_batch.hpp) and writes each
// output asked for: every image's tokens, and/or one pooled row per image.
#pragma once

#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>

namespace siglip {

size_t cpu_workspace_bytes(const Options& o, const Capacity& cap);

// `buffers` in Buffer order; each output asked for, f32 (see OutputPtrs).
void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 const OutputPtrs& outputs, void* workspace, size_t workspace_bytes);

}  // namespace siglip
