// The two CUDA kernels SigLIP needs beyond the shared kit (plugins/encoder_kit/cuda):
// the position-embedding add over a batch of equally sized images, and the
// pooling head's attention of one learned query over each image's tokens.
// Conventions as in the kit's kernels.hpp: bf16 storage, fp32 arithmetic,
// stream last, graph-safe, 0 or a cudaError_t returned (encoder_kit::cuda::error_string
// names it; last_error_detail() says which rule or call failed).
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>

namespace siglip::cuda {

using encoder_kit::cuda::bf16;

// x[r, c] = x[r, c] + table[r % period, c] for r < rows, c < cols: every image
// of a batch gets the same learned positions.
int add_periodic_rows_bf16(bf16* x, const bf16* table, int64_t rows, int64_t cols, int64_t period,
                           cudaStream_t stream);

// For each sequence s (rows cu_seqlens[s] .. cu_seqlens[s+1]-1 of kv) and head h:
//   out[s, h*hd + d] = sum_j softmax_j(query_h · k_j * scale) v_j[d]
// with kv[row] = [k (num_heads*head_dim) | v (num_heads*head_dim)] and one
// query vector shared by every sequence. An empty sequence writes zeros.
// max_seqlen bounds every sequence (the scores live in shared memory).
int probe_attention_bf16(const bf16* query, const bf16* kv, const int32_t* cu_seqlens, int num_seqs,
                         int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                         cudaStream_t stream);

}  // namespace siglip::cuda
