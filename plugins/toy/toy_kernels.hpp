// CUDA launchers of the toy plugin (stream last, error code returned).
#pragma once

#include <cstdint>

namespace toy {

// out[r][d] for every row r < budget, as toy_forward_cpu computes it.
int launch_forward(const float* x, const int32_t* cu_seqlens, const int32_t* num_seqs,
                   const float* bias, int64_t budget, int64_t hidden, int64_t max_seqs,
                   float axis_scale, float* out, int extra_kernels, float* scratch, void* stream);
// Makes the caller's stream synchronise with the device: illegal inside capture.
int illegal_sync(void* stream);
const char* error_string(int code);

}  // namespace toy
