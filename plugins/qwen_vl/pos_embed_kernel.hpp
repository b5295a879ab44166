// The one CUDA kernel the Qwen-VL towers need beyond the shared kit
// (plugins/encoder_kit/cuda): the learned position embedding, interpolated to
// each item's grid (bilinearly, 4 taps, or bicubically, 16), added to the
// patch embeddings.
// Conventions as in the kit's kernels.hpp: bf16 storage, fp32 arithmetic,
// stream last, graph-safe, 0 or a cudaError_t returned (encoder_kit::cuda::error_string
// names it; last_error_detail() says which rule or call failed).
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>

namespace qwen_vl {

using encoder_kit::cuda::bf16;

// For r < rows, c < cols, with taps k = 0..taps-1 (taps 4 or 16) of row r at
// index[r*taps + k] (rows of `table`, clamped to [0, table_rows)) and
// weight[r*taps + k]:
//   x[r, c] = bf16(x[r, c] + sum_k table[i_k, c] * w_k)
// with the sum in fp32 and one rounding (transformers' bf16 model rounds each
// product and partial sum; one rounding is closer to its fp32 result).
int pos_embed_add_bf16(bf16* x, const bf16* table, int64_t table_rows, const int32_t* index,
                       const float* weight, int taps, int64_t rows, int64_t cols,
                       cudaStream_t stream);

}  // namespace qwen_vl
