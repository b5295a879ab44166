#include "internvl_kernels.hpp"

namespace internvl::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridBlocks = 1 << 16;

int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks));
}

// Row-wise 8-value vectors: v indexes (row, vec) of a [rows, vec_cols] matrix.
__global__ void embed_tiles_vec8(const uint4* patches, const uint4* cls, const uint4* pos, uint4* x,
                                 int64_t tiles, int64_t n, int64_t vec_cols) {
  const int64_t total = tiles * (n + 1) * vec_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vec_cols, c = i - row * vec_cols;
    const int64_t t = row / (n + 1), p = row - t * (n + 1) - 1;
    if (p < 0) {
      x[i] = cls[c];
      continue;
    }
    uint4 v = patches[(t * n + p) * vec_cols + c];
    const uint4 q = pos[p * vec_cols + c];
    auto* va = reinterpret_cast<bf16*>(&v);
    const auto* qa = reinterpret_cast<const bf16*>(&q);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      va[k] = __float2bfloat16(__bfloat162float(va[k]) + __bfloat162float(qa[k]));
    x[i] = v;
  }
}

__global__ void pixel_shuffle_vec8(const uint4* x, uint4* out, int64_t tiles, int64_t grid,
                                   int64_t s, int64_t vec_cols) {
  const int64_t h = grid / s, seq = grid * grid + 1;
  const int64_t total = tiles * grid * grid * vec_cols;  // slices of one source row each
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t slice = i / vec_cols, c = i - slice * vec_cols;
    const int64_t q = slice % (s * s), r = slice / (s * s);  // output row r, part q
    const int64_t t = r / (h * h), ij = r - t * h * h, ii = ij / h, jj = ij - ii * h;
    const int64_t a = q / s, b = q - a * s;
    out[i] = x[(t * seq + 1 + (s * ii + a) * grid + s * jj + b) * vec_cols + c];
  }
}

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

int embed_tiles_bf16(const bf16* patches, const bf16* cls, const bf16* pos, bf16* x, int64_t tiles,
                     int64_t n, int64_t cols, cudaStream_t stream) {
  if (cols % 8 != 0 || !aligned(patches) || !aligned(cls) || !aligned(pos) || !aligned(x))
    return cudaErrorInvalidValue;
  const int64_t vec = cols / 8;
  embed_tiles_vec8<<<grid_for(tiles * (n + 1) * vec), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(patches), reinterpret_cast<const uint4*>(cls),
      reinterpret_cast<const uint4*>(pos), reinterpret_cast<uint4*>(x), tiles, n, vec);
  return static_cast<int>(cudaGetLastError());
}

int pixel_shuffle_bf16(const bf16* x, bf16* out, int64_t tiles, int64_t grid, int64_t s,
                       int64_t cols, cudaStream_t stream) {
  if (cols % 8 != 0 || s < 1 || grid % s != 0 || !aligned(x) || !aligned(out))
    return cudaErrorInvalidValue;
  const int64_t vec = cols / 8;
  pixel_shuffle_vec8<<<grid_for(tiles * grid * grid * vec), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(out), tiles, grid, s, vec);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace internvl::cuda
