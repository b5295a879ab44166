// The two CUDA kernels InternVL needs beyond the shared kit: assembling each
// tile's sequence (CLS row, then patch embeddings plus positions) and the
// pixel shuffle. Conventions as the kit's kernels.hpp: bf16 storage, fp32
// arithmetic, stream last, graph-safe, 0 or a cudaError_t returned. Rows are
// `cols` values, a multiple of 8, 16-byte aligned.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>

namespace internvl::cuda {

using encoder_kit::cuda::bf16;

// For every tile t < tiles: x[t*(n+1)] = cls; x[t*(n+1)+1+p] = patches[t*n+p] + pos[p].
int embed_tiles_bf16(const bf16* patches, const bf16* cls, const bf16* pos, bf16* x, int64_t tiles,
                     int64_t n, int64_t cols, cudaStream_t stream);

// transformers' pixel_shuffle per tile of a grid x grid patches after the CLS
// row (rows of seq = grid^2 + 1 in x): out row (t, i, j) of (grid/s)^2 per
// tile is the concatenation, a < s then b < s, of x's row t*seq + 1 +
// (s i + a) grid + s j + b.
int pixel_shuffle_bf16(const bf16* x, bf16* out, int64_t tiles, int64_t grid, int64_t s,
                       int64_t cols, cudaStream_t stream);

}  // namespace internvl::cuda
