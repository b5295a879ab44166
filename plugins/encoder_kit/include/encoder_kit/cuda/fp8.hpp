// FP8 E4M3 products and the kernels that make their operands, for the
// towers' precision = "fp8_linear" (Hopper and Ada: compute capability 8.9+).
//
// A Linear y = x W^T + b runs as y[r, j] = (sum_c qx[r, c] qw[j, c]) * sx[r]
// * sw[j] + b[j]: the weight quantised once per output channel
// (encoder_kit/fp8.hpp's quantize_rows_e4m3, at load), the activations per
// row (token) by the kernels below inside the forward, so that a graph
// replay computes fresh scales for fresh rows. Both scales are applied by
// cuBLASLt's outer-vector scaling after the fp32 sum; bias and residual are
// added in bf16 by its epilogue. Conventions as kernels.hpp's.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace encoder_kit::cuda {

using e4m3 = uint8_t;  // an OCP e4m3fn code (encoder_kit/fp8.hpp)

// Whether the current device has FP8 tensor cores (compute capability 8.9+).
bool fp8_supported();

// Per-row quantisation of x's first `cols` columns (row stride ld_x):
// q[r, c] = e4m3(x[r, c] / s_r), s_r = max_c |x[r, c]| / 448 (1 for a zero
// row), saturating. scale[r] receives s_r, or with rms_eps >= 0 s_r *
// rsqrt(mean_c x[r, c]^2 + rms_eps): an RMSNorm whose weight is folded into
// the next product's columns (fold_norm_weight) is then a row scale, and the
// product of q with those columns is the normalised product. A row with a
// NaN or infinity gives NaN codes and a NaN scale (it is never hidden).
// cols a multiple of 16 (the products' k rule); ld_x a multiple of 8.
int quantize_rows_e4m3(const bf16* x, int64_t ld_x, e4m3* q, float* scale, int64_t rows,
                       int64_t cols, float rms_eps, cudaStream_t stream);

// LayerNorm's form of the above: the codes of x[r, :] - mean_r and scale[r]
// = s_r * rsqrt(var_r + ln_eps) (var over cols, as LayerNorm's), s_r from the
// centred row. With the norm's weight and bias folded into the next product
// (encoder_kit/fp8.hpp's fold_layer_norm), the product of q with its columns
// is that of the normalised row. cols at most detail::kHeldRowCols.
int quantize_centred_rows_e4m3(const bf16* x, int64_t ld_x, e4m3* q, float* scale, int64_t rows,
                               int64_t cols, float ln_eps, cudaStream_t stream);

// The exact GELU's output as the next product's operand: the codes of
// gelu_erf(x) (rounded to bf16 first, as gelu_bf16 writes it), quantised per
// row as above (no norm), in one read of x [rows, cols] (contiguous). cols a
// multiple of 16, at most detail::kHeldRowCols.
int gelu_quantize_rows_e4m3(const bf16* x, e4m3* q, float* scale, int64_t rows, int64_t cols,
                            cudaStream_t stream);

// SwiGLU's middle as the down product's operand: act = silu(gate) * up from
// a [rows, 2 * inter] product in gate_up_blocked_rows' layout (blocks of
// kGateUpBlock gate columns, then the same features' up columns), quantised
// per row as above (no norm). inter a multiple of kGateUpBlock.
int silu_mul_quantize_e4m3(const bf16* gate_up, e4m3* q, float* scale, int64_t rows, int64_t inter,
                           cudaStream_t stream);

namespace detail {
// Rows up to this many columns are read once and held in registers; longer
// rows are read twice (the maximum, then the codes).
inline constexpr int64_t kHeldRowCols = 8192;
}  // namespace detail

// C[m, n] = act((A[m, k] W[n, k]^T) * a_scale[m] * w_scale[n] + bias[n])
// through cuBLASLt's FP8 products, A and W as e4m3 codes, C and bias bf16.
// There is no residual form: cuBLASLt's FP8 products that added a bf16
// residual (beta = 1) wrote some values off by up to 5% of the output's
// size on an H100 (CUDA 13.0): about 0.6% of them with the residual in
// place, 2 of 131,072 with it apart, where the products without it (other
// shapes) had none outside the test's bound. A caller adds the residual
// itself (add_bf16).
// The epilogues are GemmPlan's None, Bias and BiasGeluTanh (cuBLASLt's own
// GELU, the tanh form). k and n multiples of 16; every pointer 16-byte
// aligned. The algorithm is picked per m, as GemmPlan's.
class Fp8GemmPlan {
 public:
  Fp8GemmPlan();
  ~Fp8GemmPlan();
  Fp8GemmPlan(Fp8GemmPlan&&) noexcept;
  Fp8GemmPlan& operator=(Fp8GemmPlan&&) noexcept;
  Fp8GemmPlan(const Fp8GemmPlan&) = delete;
  Fp8GemmPlan& operator=(const Fp8GemmPlan&) = delete;

  // Fixes the problem and asks cuBLASLt for an algorithm at m_max: fails
  // here when the library or the device has no FP8 product for it. Needs a
  // current CUDA device; call outside graph capture.
  int initialize(int64_t m_max, int64_t n, int64_t k, GemmPlan::Epilogue ep);

  // 0 < m <= m_max (m == 0 does nothing). workspace: GemmPlan::workspace_bytes().
  int run(cublasLtHandle_t handle, const e4m3* A, const float* a_scale, const e4m3* W,
          const float* w_scale, const bf16* bias, bf16* C, int64_t m, void* workspace,
          size_t workspace_bytes, cudaStream_t stream) const;

  // Times up to max_candidates of cuBLASLt's proposals for m on these
  // buffers (graph replays, alternating rounds) and keeps the fastest for m.
  // Synchronises the stream: outside capture.
  int tune(cublasLtHandle_t handle, const e4m3* A, const float* a_scale, const e4m3* W,
           const float* w_scale, const bf16* bias, bf16* C, int64_t m, void* workspace,
           size_t workspace_bytes, cudaStream_t stream, int max_candidates = 8);

  int64_t m_max() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace encoder_kit::cuda
