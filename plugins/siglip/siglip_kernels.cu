#include "siglip_kernels.hpp"

#include <encoder_kit/cuda/check.hpp>

#include <cmath>

namespace siglip::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kProbeThreads = 128;
constexpr int kMaxGridBlocks = 1 << 16;
// Shared memory a block may use without opting in to more.
constexpr size_t kDefaultSharedBytes = 48 * 1024;

int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxGridBlocks ? (blocks > 0 ? blocks : 1) : kMaxGridBlocks);
}

// 8 bf16 at a time (rows are 16-byte multiples and aligned).
__global__ void add_periodic_rows_vec8(bf16* x, const bf16* table, int64_t rows, int64_t vec_cols,
                                       int64_t period) {
  const int64_t n = rows * vec_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vec_cols, c = i - r * vec_cols;
    uint4 xv = reinterpret_cast<const uint4*>(x)[i];
    const uint4 tv = reinterpret_cast<const uint4*>(table)[(r % period) * vec_cols + c];
    auto* xa = reinterpret_cast<bf16*>(&xv);
    const auto* ta = reinterpret_cast<const bf16*>(&tv);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      xa[k] = __float2bfloat16(__bfloat162float(xa[k]) + __bfloat162float(ta[k]));
    reinterpret_cast<uint4*>(x)[i] = xv;
  }
}

__global__ void add_periodic_rows_scalar(bf16* x, const bf16* table, int64_t rows, int64_t cols,
                                         int64_t period) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    x[i] =
        __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(table[(r % period) * cols + c]));
  }
}

// Reduces `v` over the block (kProbeThreads threads) with `op`; every thread
// gets the result. `red` holds one float per warp.
template <class Op>
__device__ float block_reduce(float v, float* red, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // red may still be read from a previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < kProbeThreads / 32; ++w) v = op(v, red[w]);
  return v;
}

// One block per (sequence, head). Shared: scaled query [head_dim], per-warp
// partials, then the scores [max_seqlen].
__global__ void __launch_bounds__(kProbeThreads)
    probe_attention_kernel(const bf16* query, const bf16* kv, const int32_t* cu_seqlens,
                           int max_seqlen, int num_heads, int head_dim, float scale, bf16* out) {
  extern __shared__ float shared[];
  float* q = shared;
  float* red = q + head_dim;
  float* p = red + kProbeThreads / 32;
  const int s = blockIdx.x, h = blockIdx.y, width = num_heads * head_dim;
  const int64_t ld = 2 * static_cast<int64_t>(width);
  const int start = cu_seqlens[s];
  // Sequences are at most max_seqlen long by contract; clamping keeps a bad
  // table from writing past the scores.
  const int len = min(cu_seqlens[s + 1] - start, max_seqlen);
  bf16* o = out + static_cast<int64_t>(s) * width + h * head_dim;
  if (len <= 0) {  // padding sequence: zeros, never stale memory
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) o[d] = __float2bfloat16(0.0f);
    return;
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x)
    q[d] = __bfloat162float(query[h * head_dim + d]) * scale;
  __syncthreads();

  const bf16* keys = kv + static_cast<int64_t>(start) * ld + h * head_dim;
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const bf16* k = keys + j * ld;
    float dot = 0.0f;
    for (int e = 0; e < head_dim; ++e) dot += q[e] * __bfloat162float(k[e]);
    p[j] = dot;
    local_max = fmaxf(local_max, dot);
  }
  const float m = block_reduce(local_max, red, [](float a, float b) { return fmaxf(a, b); });
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const float e = expf(p[j] - m);
    p[j] = e;
    local_sum += e;
  }
  const float inv = 1.0f / block_reduce(local_sum, red, [](float a, float b) { return a + b; });

  // Threads over head dims: consecutive threads read consecutive values of a row.
  const bf16* values = keys + width;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) acc += p[j] * __bfloat162float(values[j * ld + d]);
    o[d] = __float2bfloat16(acc * inv);
  }
}

}  // namespace

int add_periodic_rows_bf16(bf16* x, const bf16* table, int64_t rows, int64_t cols, int64_t period,
                           cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(rows >= 0 && cols > 0 && period > 0);
  if (rows == 0) return 0;
  if (cols % 8 == 0 && encoder_kit::cuda::detail::aligned16(x) &&
      encoder_kit::cuda::detail::aligned16(table)) {
    const int64_t vec_cols = cols / 8;
    add_periodic_rows_vec8<<<grid_for(rows * vec_cols), kThreads, 0, stream>>>(x, table, rows,
                                                                               vec_cols, period);
  } else {
    add_periodic_rows_scalar<<<grid_for(rows * cols), kThreads, 0, stream>>>(x, table, rows, cols,
                                                                             period);
  }
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

int probe_attention_bf16(const bf16* query, const bf16* kv, const int32_t* cu_seqlens, int num_seqs,
                         int max_seqlen, int num_heads, int head_dim, float scale, bf16* out,
                         cudaStream_t stream) {
  ENCODER_KIT_REQUIRE(num_seqs >= 0 && num_heads > 0 && head_dim > 0 && max_seqlen > 0);
  ENCODER_KIT_REQUIRE(num_heads <= 65535);
  const size_t shared =
      (static_cast<size_t>(head_dim) + kProbeThreads / 32 + static_cast<size_t>(max_seqlen)) *
      sizeof(float);
  ENCODER_KIT_REQUIRE(shared <= kDefaultSharedBytes);
  if (num_seqs == 0) return 0;
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>(num_heads));
  probe_attention_kernel<<<grid, kProbeThreads, shared, stream>>>(query, kv, cu_seqlens, max_seqlen,
                                                                  num_heads, head_dim, scale, out);
  ENCODER_KIT_LAUNCH_CHECK();
  return 0;
}

}  // namespace siglip::cuda
