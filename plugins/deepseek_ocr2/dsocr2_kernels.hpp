// The CUDA kernels DeepSeek-OCR-2's vision side needs beyond the shared kit
// (plugins/encoder_kit/cuda): the SAM's patch and 3x3 convolutions as im2col
// for cuBLASLt products, window partitioning, the encoder's rotary and row copies between
// per-view layouts. Attention (the SAM's relative-position bias, the encoder's grouped KV heads
// and prefix mask) is the kit's: encoder_kit/cuda/attention.hpp's AttentionExtras.
// Conventions as in the kit's kernels.hpp: bf16 storage, fp32 arithmetic,
// row-major tensors, stream last, graph-safe (no allocation, no sync, no host
// read of device memory), 0 or a cudaError_t returned
// (encoder_kit::cuda::error_string names it; last_error_detail() says which
// rule or call failed). Views are independent: no kernel mixes two views'
// rows, so whatever a padded view holds stays in that view.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>

namespace dsocr2::cuda {

using encoder_kit::cuda::bf16;

// Conv2d(3, D, p, stride p) input rows: pixels [views, 3, side, side] (planar)
// -> cols [views * g * g, 3 * p * p] in the weight's (c, ky, kx) order, g = side / p.
int patch_im2col_bf16(const bf16* pixels, int64_t views, int side, int patch, bf16* cols,
                      cudaStream_t stream);

// x[r, :] = bf16(x[r, :] + pos[r % period, :]) for r < rows (the view's
// position table added to every view).
int add_periodic_rows_bf16(bf16* x, const bf16* pos, int64_t rows, int64_t period, int64_t cols,
                           cudaStream_t stream);

// window_partition of channels-last maps x [views, g, g, cols] with windows of
// win x win (the map zero-padded at the bottom/right to per = ceil(g / win)
// windows a side): out [views, per * per, win * win, cols], padded rows zero.
// win == g gives the identity (a global-attention layer).
int window_partition_bf16(const bf16* x, bf16* out, int64_t views, int g, int win, int64_t cols,
                          cudaStream_t stream);

// window_unpartition plus the residual: x[token] = bf16(x[token] + w[row of token]),
// rows of padding dropped. Layouts as window_partition_bf16.
int window_unpartition_add_bf16(bf16* x, const bf16* w, int64_t views, int g, int win, int64_t cols,
                                cudaStream_t stream);

// Conv2d(cin, ., 3, stride, pad 1) input rows on channels-last maps x
// [views, h, w, cin] -> cols [views * ho * wo, 9 * cin] in (ky, kx, c) order
// (the weight permuted to [cout, 3, 3, cin] on upload); ho = (h - 1) / stride + 1.
int conv3x3_im2col_bf16(const bf16* x, int64_t views, int h, int w, int cin, int stride, bf16* cols,
                        cudaStream_t stream);

// dst[v * dst_view_rows + dst_off + i, :] = src[v * src_view_rows + src_off + i, :]
// for v < views, i < rows. src_view_rows = 0 repeats one block into every view
// (the learned queries).
int copy_view_rows_bf16(const bf16* src, int64_t src_view_rows, int64_t src_off, bf16* dst,
                        int64_t dst_view_rows, int64_t dst_off, int64_t rows, int64_t views,
                        int64_t cols, cudaStream_t stream);

// Rotate-half rotary, in place, on the first `heads` heads of each row of x
// (row stride in elements; heads of head_dim contiguous from column 0), the
// position of row r being r % period; cos/sin fp32 [period, head_dim / 2].
int rotary_rows_bf16(bf16* x, int64_t row_stride, int64_t rows, int period, int heads, int head_dim,
                     const float* cos, const float* sin, cudaStream_t stream);

}  // namespace dsocr2::cuda
