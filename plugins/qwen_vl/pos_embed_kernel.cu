#include "pos_embed_kernel.hpp"

#include <encoder_kit/cuda/check.hpp>

namespace qwen_vl {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridBlocks = 1 << 16;

int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxGridBlocks ? (blocks > 0 ? blocks : 1) : kMaxGridBlocks);
}

// V bf16 per thread (8: rows are 16-byte multiples and aligned; 1 otherwise);
// TAPS table rows a patch (4 bilinear, 16 bicubic), unrolled.
template <int V, int TAPS>
__global__ void pos_embed_add_kernel(bf16* __restrict__ x, const bf16* __restrict__ table,
                                     int64_t table_rows, const int32_t* __restrict__ index,
                                     const float* __restrict__ weight, int64_t rows, int64_t cols) {
  constexpr int taps = TAPS;
  const int64_t per_row = cols / V, n = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i - r * per_row) * V;
    float acc[V];
#pragma unroll
    for (int k = 0; k < taps; ++k) {
      // A bad index table must not read outside the embedding.
      int64_t t = index[r * taps + k];
      t = t < 0 ? 0 : (t >= table_rows ? table_rows - 1 : t);
      const float w = weight[r * taps + k];
      bf16 tv[V];
      if constexpr (V == 8) {
        *reinterpret_cast<uint4*>(tv) = *reinterpret_cast<const uint4*>(table + t * cols + c);
      } else {
        tv[0] = table[t * cols + c];
      }
#pragma unroll
      for (int v = 0; v < V; ++v) {
        acc[v] = k == 0 ? __bfloat162float(tv[v]) * w : fmaf(__bfloat162float(tv[v]), w, acc[v]);
      }
    }
    bf16 xv[V];
    if constexpr (V == 8) {
      *reinterpret_cast<uint4*>(xv) = *reinterpret_cast<const uint4*>(x + r * cols + c);
    } else {
      xv[0] = x[r * cols + c];
    }
#pragma unroll
    for (int v = 0; v < V; ++v) xv[v] = __float2bfloat16(__bfloat162float(xv[v]) + acc[v]);
    if constexpr (V == 8) {
      *reinterpret_cast<uint4*>(x + r * cols + c) = *reinterpret_cast<const uint4*>(xv);
    } else {
      x[r * cols + c] = xv[0];
    }
  }
}

}  // namespace

int pos_embed_add_bf16(bf16* x, const bf16* table, int64_t table_rows, const int32_t* index,
                       const float* weight, int taps, int64_t rows, int64_t cols,
                       cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && table_rows > 0 && (taps == 4 || taps == 16));
  if (rows == 0) return 0;
  using encoder_kit::cuda::detail::aligned16;
  const bool wide = cols % 8 == 0 && aligned16(x) && aligned16(table);
  const int grid = grid_for(wide ? rows * cols / 8 : rows * cols);
  if (wide && taps == 4)
    pos_embed_add_kernel<8, 4>
        <<<grid, kThreads, 0, stream>>>(x, table, table_rows, index, weight, rows, cols);
  else if (wide)
    pos_embed_add_kernel<8, 16>
        <<<grid, kThreads, 0, stream>>>(x, table, table_rows, index, weight, rows, cols);
  else if (taps == 4)
    pos_embed_add_kernel<1, 4>
        <<<grid, kThreads, 0, stream>>>(x, table, table_rows, index, weight, rows, cols);
  else
    pos_embed_add_kernel<1, 16>
        <<<grid, kThreads, 0, stream>>>(x, table, table_rows, index, weight, rows, cols);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace qwen_vl
