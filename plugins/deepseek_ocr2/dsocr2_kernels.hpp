// The CUDA kernels DeepSeek-OCR-2's vision side needs beyond the shared kit
// (plugins/encoder_kit/cuda): the SAM's patch and 3x3 convolutions as im2col
// for cuBLASLt products, window partitioning, one attention kernel for both the SAM (additive
// rel-pos bias) and the Qwen2-style encoder (GQA, image/query mask), the encoder's rotary and row
// copies between per-view layouts.
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

// Attention over sequences of equal length: sequence s is rows
// [s * seq_len, (s + 1) * seq_len) of q, k and v; query head h reads key/value
// head h / group. out[row, h * head_dim + d] = softmax(scale q.k + bias) v.
//  - prefix > 0 (the encoder's mask): query row i sees keys j < prefix when
//    i < prefix, else keys j <= i; prefix == 0: every key of the sequence.
//  - rel_h / rel_w (both or neither): the SAM's decomposed relative
//    positions over the sequence as an hn x wn grid (hn, wn <= kMaxRelGrid).
//    The tables are get_rel_pos's, already resized: bf16 [2 hn - 1, head_dim]
//    and [2 wn - 1, head_dim], their rows zero-padded to a multiple of 8.
//    Query cell (qy, qx) and key cell (ky, kx) add the unscaled
//    q . rel_h[qy - ky + hn - 1] + q . rel_w[qx - kx + wn - 1] to the logit,
//    computed inside the kernel (nothing is materialised in global memory).
//  - view_count (device int32, may be null): sequences at or past
//    view_count * seqs_per_view are padding and skipped (their rows unwritten).
// head_dim a multiple of 8 up to 64; q/k/v/out and their row strides 16-byte
// aligned (strides multiples of 8 elements).
constexpr int kMaxRelGrid = 128;  // bounds the shared memory of the bias products
struct AttentionArgs {
  const bf16 *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t q_stride = 0, kv_stride = 0;
  bf16* out = nullptr;
  int64_t out_stride = 0;
  int heads = 0, group = 1, head_dim = 0;
  int seq_len = 0;
  int prefix = 0;
  const bf16 *rel_h = nullptr, *rel_w = nullptr;
  int hn = 0, wn = 0;
  const int32_t* view_count = nullptr;
  int seqs_per_view = 1;
  float scale = 1.0f;
};
int attention_bf16(const AttentionArgs& a, int64_t num_seqs, cudaStream_t stream);

}  // namespace dsocr2::cuda
