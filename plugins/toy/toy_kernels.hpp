// CUDA launchers of the toy plugin (stream last, error code returned).
#pragma once

#include <cstdint>

namespace toy {

// out[r][d] for every row r < budget, as the CPU forward computes it; and, when
// `pooled` is not null, pooled[s][d] = the mean of sequence s's rows for every
// sequence slot s < max_seqs (zero past num_seqs).
int launch_forward(const float* x, const int32_t* cu_seqlens, const int32_t* num_seqs,
                   const float* bias, int64_t budget, int64_t hidden, int64_t max_seqs,
                   float axis_scale, float* out, float* pooled, int extra_kernels, float* scratch,
                   void* stream);
// dst[d] = the mean over `rows` rows of src[r][d] (rows > 0).
int launch_mean_rows(const float* src, int64_t rows, int64_t hidden, float* dst, void* stream);
const char* error_string(int code);

}  // namespace toy
