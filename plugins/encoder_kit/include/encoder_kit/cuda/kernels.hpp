// CUDA kernels the vision-tower plugins share (Qwen2.5-VL now, SigLIP later).
//
// Conventions, for every function below:
//  - bf16 storage, fp32 arithmetic inside, row-major tensors;
//  - the stream comes last; nothing allocates, synchronises or reads device
//    memory on the host, so every call can be recorded into a CUDA graph
//    (GemmPlan::initialize and GemmPlan::tune are the exceptions: call them outside
//    capture);
//  - the return value is 0 on success, a cudaError_t (1..9999) for a CUDA
//    failure or a bad argument (cudaErrorInvalidValue), or
//    kCublasErrorBase + cublasStatus_t for a cuBLASLt failure; error_string()
//    names any of them;
//  - vector paths need 16-byte aligned pointers and row lengths that are a
//    multiple of 8 elements; other shapes take slower scalar paths (the
//    attention kernel and rotary have stricter rules, stated there).
// Plain C++: this header is included by .cpp files compiled by the host compiler.
#pragma once

#include <encoder_kit/cuda/attention.hpp>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encoder_kit {
class TuningCache;  // encoder_kit/tuning_cache.hpp
}  // namespace encoder_kit

namespace encoder_kit::cuda {

using bf16 = __nv_bfloat16;

inline constexpr int kCublasErrorBase = 10000;

// Name and description of a code returned by this library ("no error" for 0).
const char* error_string(int code);

// "expression at file:line" of the latest failure this thread saw in this
// library (empty when none): which argument rule or CUDA call failed.
const char* last_error_detail();

// ---------------------------------------------------------------------------
// Matrix products through cuBLASLt: C[m,n] = act(A[m,k] · W[n,k]^T + bias[n])
// (+ residual[m,n]), W as a PyTorch Linear stores its weight.
class GemmPlan {
 public:
  enum class Epilogue {
    None,          // C = A·W^T
    Bias,          // C = A·W^T + bias
    BiasGelu,      // C = gelu_erf(A·W^T + bias): Bias epilogue, then gelu_bf16 in place
    BiasGeluTanh,  // C = gelu_tanh(A·W^T + bias): fused into cuBLASLt's epilogue
  };

  // Workspace run() wants (cuBLAS's recommendation for Hopper); pass at least this.
  static size_t workspace_bytes();

  GemmPlan();
  ~GemmPlan();
  GemmPlan(GemmPlan&&) noexcept;
  GemmPlan& operator=(GemmPlan&&) noexcept;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  // Fixes the problem (n, k, epilogue, residual) and picks the algorithm for
  // m_max (heuristic queries use a private cuBLASLt handle made here). add_residual computes C =
  // A·W^T + bias + residual (beta = 1; residual may alias C); it cannot be combined with a GELU
  // epilogue. Needs a current CUDA device; call outside graph capture.
  int initialize(int64_t m_max, int64_t n, int64_t k, Epilogue ep, bool add_residual);

  // Picks (and caches) the algorithm for one row count ahead of time. run()
  // does the same lazily for an m it has not seen; that is a host-only query,
  // safe inside capture, but costs some microseconds the first time.
  int prepare(int64_t m);

  // Times up to max_candidates of cuBLASLt's proposals for this m on the given
  // buffers, and on Hopper our own kernel (detail::gemm_sm90_bf16: unsplit, and
  // with k split across clusters where the tiles leave multiprocessors idle;
  // None and Bias epilogues), and keeps the fastest for m. Synchronises the stream: call it
  // outside capture (e.g. during the warm-up run). Buffers as for run().
  int tune(cublasLtHandle_t handle, const bf16* A, const bf16* W, const bf16* bias,
           const bf16* residual, bf16* C, int64_t m, void* workspace, size_t workspace_bytes,
           cudaStream_t stream, int max_candidates = 8);

  // Makes tune() look its choice up in `cache` first (see
  // encoder_kit/cuda/tuning_cache.hpp): a stored algorithm that
  // cublasLtMatmulAlgoCheck still accepts is taken without timing; otherwise
  // tune() times as usual and stores its pick (the caller saves the cache).
  // Call after initialize(), which forgets it; nullptr turns it off.
  void set_tuning_cache(std::shared_ptr<TuningCache> cache);
  // tune() calls since initialize() that timed candidates / took a cached choice.
  int64_t tunings_timed() const;
  int64_t tunings_from_cache() const;
  // The algorithm chosen for m in the cache's encoding ("" when none yet).
  std::string choice_for(int64_t m) const;
  // What tune() would time for m, in the cache's encoding (the heuristic's
  // proposals, then split-K forms up to 2048 rows, then our Hopper kernel's
  // forms, "sm90:s=<splits>"), and run() with one of
  // them from now on for m: the tests check every candidate's results.
  // split_k_forms, when given, receives how many of them are split-K forms.
  int candidates_for(int64_t m, int max_candidates, std::vector<std::string>& encoded,
                     int* split_k_forms = nullptr) const;
  int use_choice(int64_t m, const std::string& encoded);

  // 0 < m <= m_max (m == 0 does nothing). bias is required by the Bias*
  // epilogues, residual by add_residual plans; all pointers 16-byte aligned.
  int run(cublasLtHandle_t handle, const bf16* A, const bf16* W, const bf16* bias,
          const bf16* residual, bf16* C, int64_t m, void* workspace, size_t workspace_bytes,
          cudaStream_t stream) const;

  int64_t m_max() const;
  int64_t n() const;
  int64_t k() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// The SwiGLU MLP's first half in one kernel (Hopper only, our own product:
// gemm_sm90.cu): y[r, f] = silu(x[r,:] · gate[f,:] + gate_b[f]) * (x[r,:] · up[f,:] + up_b[f])
// for f < inter, rounded as the bf16 module rounds (gate and up, then silu,
// then the product), without writing the [gate | up] product to memory.
//
// The weights (and biases, as rows of one column) are laid out in blocks of
// kGateUpBlock gate rows followed by the same features' up rows, zero rows
// padding the last block: block_gate_up_rows() writes that layout (on the
// host) into gate_up_blocked_rows(inter) rows. rows any, k and inter
// multiples of 8, ld_y >= inter and a multiple of 8; x, y and the weights
// 16-byte aligned. splits: how many blocks (a thread-block cluster) share
// each output tile's k range, their fp32 partial sums added in distributed
// shared memory: 1, 2, 4 or 8, or 0 to pick from the sizes (more than 1 only
// when the tiles alone leave multiprocessors idle, e.g. 256 rows).
inline constexpr int64_t kGateUpBlock = 128;
int64_t gate_up_blocked_rows(int64_t inter);
// gate and up: [inter, cols] row-major; dst: [gate_up_blocked_rows(inter), cols]. T is
// bf16 or float (a model blocks its float weights before converting them).
template <class T>
void block_gate_up_rows(const T* gate, const T* up, int64_t inter, int64_t cols, T* dst) {
  const int64_t blocks = (inter + kGateUpBlock - 1) / kGateUpBlock;
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int half = 0; half < 2; ++half)
      for (int64_t i = 0; i < kGateUpBlock; ++i) {
        const int64_t feature = blk * kGateUpBlock + i;
        T* row = dst + ((2 * blk + half) * kGateUpBlock + i) * cols;
        if (feature >= inter) {  // the last block's padding
          std::fill(row, row + cols, T{});
          continue;
        }
        const T* src = (half == 0 ? gate : up) + feature * cols;
        std::copy(src, src + cols, row);
      }
}
// Compute capability 9.0 with the sm_90a code present and a driver that encodes tensor maps.
bool gate_up_silu_mul_supported();
// splits: blocks sharing a tile's k range (1, 2, 4, 8; 0 picks). tile_n: the
// tile's width in W's rows, 256 or 128 (0 picks: 128 where tiles of 256 leave
// multiprocessors idle, e.g. 256 rows).
int gate_up_silu_mul_bf16(const bf16* x, const bf16* w_blocked, const bf16* b_blocked, bf16* y,
                          int64_t rows, int64_t k, int64_t inter, int64_t ld_y, cudaStream_t stream,
                          int splits = 0, int tile_n = 0);
// The same on RMSNorm'd rows, with the norm in the product: y = silu(gate) * up
// of n(x) W^T + b, n(x) = x * rsqrt(mean(x^2) + eps) * w_norm over x's k columns.
// w_norm is folded into the weights beforehand (fold_norm_weight on the
// blocked rows): n(x) W^T = rsqrt(...) * (x (W diag(w_norm))^T), so the
// kernel sums each row's squares from the A tiles it stages and scales the
// products; the normalised rows are never written. Not Qwen2RMSNorm's
// rounding (it rounds x * rsqrt to bf16, then the product with w_norm): the
// difference is of the order of one bf16 rounding of the normalised rows.
int rms_gate_up_silu_mul_bf16(const bf16* x, const bf16* w_blocked_folded, const bf16* b_blocked,
                              bf16* y, int64_t rows, int64_t k, int64_t inter, int64_t ld_y,
                              float eps, cudaStream_t stream, int splits = 0, int tile_n = 0);
// The plain product's form: y[rows, n] = n(x) W^T + bias (bias may be null),
// n(x) the RMSNorm of x's k columns with its weight folded into W
// (fold_norm_weight), as after a transformer block's first norm (Qwen2.5-VL's
// norm1 and qkv). Same rules and rounding note as above; tiles of 256.
bool rms_linear_supported();
int rms_linear_bf16(const bf16* x, const bf16* w_folded, const bf16* bias, bf16* y, int64_t rows,
                    int64_t n, int64_t k, float eps, cudaStream_t stream, int splits = 0);
// w[r, i] *= norm_w[i] for every row r of a row-major [rows, cols] matrix (a
// linear layer's weights after an RMSNorm or LayerNorm without bias). T is
// float (a model folds its float weights before converting them).
template <class T>
void fold_norm_weight(T* w, int64_t rows, int64_t cols, const T* norm_w) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) w[r * cols + i] *= norm_w[i];
}

// ---------------------------------------------------------------------------
// Normalisations, one row at a time over `cols` values.

// Qwen2RMSNorm as transformers computes it:
// y = bf16(w * bf16(x * rsqrt(mean(x^2) + eps))).
int rms_norm_bf16(const bf16* x, const bf16* w, bf16* y, int64_t rows, int64_t cols, float eps,
                  cudaStream_t stream);

// torch.nn.LayerNorm: y = (x - mean) * rsqrt(var + eps) * w + b (b may be null).
int layer_norm_bf16(const bf16* x, const bf16* w, const bf16* b, bf16* y, int64_t rows,
                    int64_t cols, float eps, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Element-wise.

// y[r,c] = silu(gate[r,c]) * up[r,c] for c < cols, each operand with its own
// leading dimension (in elements), so a fused [gate | up] GEMM output of width
// 2*I is read as gate = C, up = C + I, ld_gate = ld_up = 2*I. silu(gate) is
// rounded to bf16 before the product, as the bf16 PyTorch module does.
int silu_mul_bf16(const bf16* gate, int64_t ld_gate, const bf16* up, int64_t ld_up, bf16* y,
                  int64_t ld_y, int64_t rows, int64_t cols, cudaStream_t stream);

// y = gelu(x) over n values (exact erf form, or the tanh approximation);
// y may equal x.
int gelu_bf16(const bf16* x, bf16* y, int64_t n, bool tanh_approximation, cudaStream_t stream);

// y = a + b over n values (y may equal a or b).
int add_bf16(const bf16* a, const bf16* b, bf16* y, int64_t n, cudaStream_t stream);

// dst[r,:] = src[index[r],:] for r < rows (index on the device, int32); a
// negative index writes a zero row. Window reordering and its inverse.
// src and dst must not overlap.
int gather_rows_bf16(const bf16* src, const int32_t* index, bf16* dst, int64_t rows, int64_t cols,
                     cudaStream_t stream);

// ---------------------------------------------------------------------------
// Rotary position embedding, in place, on the q and k parts of a packed
// qkv[tokens, 3, num_heads, head_dim] (v untouched). Qwen2.5-VL's vision
// rotary (transformers' apply_rotary_pos_emb_vision): with h = head_dim/2,
//   out[d]     = x[d]     * cos[t,d] - x[d + h] * sin[t,d]
//   out[d + h] = x[d + h] * cos[t,d] + x[d]     * sin[t,d]      (d < h)
// i.e. rotate_half over the whole head with cos/sin of width head_dim made of
// two equal halves. cos/sin are fp32; only their first h columns of each row
// are read, at row stride cs_stride (in floats): pass h for a compact
// [tokens, head_dim/2] table (the model's `freqs`), or head_dim for the
// duplicated [tokens, head_dim] table transformers builds. head_dim even.
int rotary_bf16(bf16* qkv, int64_t tokens, int num_heads, int head_dim, const float* cos,
                const float* sin, int64_t cs_stride, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Attention: thin forms of run_attention (encoder_kit/cuda/attention.hpp,
// where AttentionParams states the contract), kept for the plugins' calls.
// varlen_attention_bf16: no rotary, the dispatch's pick of instance.
int varlen_attention_bf16(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs, int max_seqlen,
                          int num_heads, int head_dim, float scale, bf16* out, cudaStream_t stream);

// varlen_attention_rotary_bf16: q and k rotated as rotary_bf16(qkv, ..., cos,
// sin, cs_stride) would rotate them, in shared memory as the tiles arrive
// (qkv is not written), which saves rotary_bf16's pass over q and k; for
// max_seqlen <= 64 (Qwen2.5-VL's 64-patch windows).
int varlen_attention_rotary_bf16(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                 int max_seqlen, int num_heads, int head_dim, float scale,
                                 const float* cos, const float* sin, int64_t cs_stride, bf16* out,
                                 cudaStream_t stream);

}  // namespace encoder_kit::cuda
