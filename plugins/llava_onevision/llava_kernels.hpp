// The packing's one kernel: the host-planned weighted gather (llava_pack.hpp).
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>

namespace llava_onevision::cuda {

using encoder_kit::cuda::bf16;

// out[r] = sum over k < taps of weight[r, k] * (src[r, k] == -1 ? newline :
// projected[src[r, k]]) for r < rows, accumulated in f32; cols a multiple of 8,
// every pointer 16-byte aligned. Returns a cudaError_t value.
int pack_rows_bf16(const bf16* projected, const bf16* newline, const int32_t* src,
                   const float* weight, bf16* out, int64_t rows, int taps, int64_t cols,
                   cudaStream_t stream);

}  // namespace llava_onevision::cuda
