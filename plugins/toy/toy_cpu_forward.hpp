// The toy's forward on the CPU (toy_kernels.cu is the same on CUDA), and the
// padding check that makes a missing padding step fail loudly.
#pragma once

#include "toy_config.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>

namespace toy {

// One forward's memory, as the runtime passed it.
struct ForwardCall {
  const eg_graph_shape& shape;
  const eg_tensor* buffers;  // in Buffer order
  float* out;                // output "rows": [token_budget, hidden]
  float* pooled;             // output "pooled": [pooled_slots, hidden], or null
  int64_t pooled_slots;
  float* workspace;  // extra_kernels + 1 floats, or null
};

// Per sequence s occupying rows [c_s, c_{s+1}):
//   rows[r][d] = bias + scale * sum_{c_s <= q <= r} x[q][d] + 0.001 * (r - c_s) + 0.01 * d,
// padded rows 0, pooled[s] the mean of sequence s's rows (0 past num_seqs).
void cpu_forward(const Options& o, const ForwardCall& call);
// dst[d] = the mean over `rows` rows (> 0) of src[r][d].
void cpu_mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden);

}  // namespace toy
