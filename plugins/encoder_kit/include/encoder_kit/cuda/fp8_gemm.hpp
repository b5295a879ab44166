// FP8 (e4m3) linear layers on Hopper: activations quantised per row on the
// device, weights per output channel at load, and the product through
// cuBLASLt's FP8 matmul with fp32 accumulation and bf16 output, both scale
// vectors applied in cuBLASLt ("outer vector" scaling,
// CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F). Conventions as kernels.hpp's:
// row-major, the stream last, graph-capturable launches, error codes.
// The quantisation itself is fp8_e4m3.hpp's (the host reference).
#pragma once

#include <encoder_kit/cuda/fp8_e4m3.hpp>
#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encoder_kit::cuda {

// q[r, :] = e4m3(x[r, :] / scale[r]), scale[r] = max(amax(x[r, :]),
// kFp8AmaxFloor) / 448 for r < rows: quantize_row_e4m3 bit for bit. x is
// [rows, cols] bf16, q [rows, cols] e4m3 codes, scale [rows] fp32.
int quantize_rows_e4m3(const bf16* x, uint8_t* q, float* scale, int64_t rows, int64_t cols,
                       cudaStream_t stream);

// y[r, c] = act(y[r, c] + bias[c]) in place (fp32 inside, one bf16 rounding):
// Fp8GemmPlan's epilogue where cuBLASLt does not fuse it. act: none, or GELU
// in the erf or tanh form.
enum class Fp8Act { None, GeluErf, GeluTanh };
int bias_act_bf16(bf16* y, const bf16* bias, int64_t rows, int64_t cols, Fp8Act act,
                  cudaStream_t stream);

// C[m,n] = act(diag(a_scale) (A_q[m,k] · W_q[n,k]^T) diag(w_scale) + bias[n])
// (+ residual[m,n]): A_q, a_scale from quantize_rows_e4m3, W_q, w_scale from
// Fp8DeviceWeights (or quantize_rows_e4m3 of W). fp32 accumulation with
// cuBLASLt's full-precision (not "fast") accumulation; C is bf16.
// k a multiple of 16 and n of 8 (cuBLASLt's FP8 alignment); any m.
class Fp8GemmPlan {
 public:
  using Epilogue = GemmPlan::Epilogue;

  static size_t workspace_bytes();  // as GemmPlan's

  Fp8GemmPlan();
  ~Fp8GemmPlan();
  Fp8GemmPlan(Fp8GemmPlan&&) noexcept;
  Fp8GemmPlan& operator=(Fp8GemmPlan&&) noexcept;
  Fp8GemmPlan(const Fp8GemmPlan&) = delete;
  Fp8GemmPlan& operator=(const Fp8GemmPlan&) = delete;

  // As GemmPlan::initialize. The bias (and tanh GELU) goes into cuBLASLt's
  // epilogue when it has an FP8 algorithm for that and fuse_epilogue is set;
  // otherwise the product is followed by bias_act_bf16 (the erf GELU is
  // always that pass). Fails (cuBLASLt's NOT_SUPPORTED) where cuBLASLt has no
  // outer-vector-scaled FP8 product: before Hopper, or an older cuBLAS.
  int initialize(int64_t m_max, int64_t n, int64_t k, Epilogue ep, bool add_residual,
                 bool fuse_epilogue = true);
  // Whether the bias runs in cuBLASLt's epilogue (initialize's outcome).
  bool epilogue_fused() const;

  int prepare(int64_t m);  // as GemmPlan::prepare

  // Times up to max_candidates of cuBLASLt's proposals for this m on the
  // given buffers and keeps the fastest (outside capture; synchronises).
  int tune(cublasLtHandle_t handle, const uint8_t* A, const float* a_scale, const uint8_t* W,
           const float* w_scale, const bf16* bias, const bf16* residual, bf16* C, int64_t m,
           void* workspace, size_t workspace_bytes, cudaStream_t stream, int max_candidates = 8);

  // 0 < m <= m_max (m == 0 does nothing); bias as the epilogue needs it,
  // residual for add_residual plans (it may alias C); pointers 16-byte aligned.
  int run(cublasLtHandle_t handle, const uint8_t* A, const float* a_scale, const uint8_t* W,
          const float* w_scale, const bf16* bias, const bf16* residual, bf16* C, int64_t m,
          void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  int64_t m_max() const;
  int64_t n() const;
  int64_t k() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Weights quantised per output row (fp8_e4m3.hpp's quantize_row_e4m3) on the
// host and uploaded in one allocation: add() each [rows, cols] matrix with
// the pointers that receive its codes and its rows' scales, then upload()
// once. The allocation lives as long as the object.
class Fp8DeviceWeights {
 public:
  Fp8DeviceWeights() = default;
  ~Fp8DeviceWeights();  // frees the allocation, logging (not throwing) a failure
  Fp8DeviceWeights(const Fp8DeviceWeights&) = delete;
  Fp8DeviceWeights& operator=(const Fp8DeviceWeights&) = delete;

  // Quantised now; `w` is not kept.
  void add(const uint8_t** codes, const float** scales, const std::vector<float>& w, int64_t rows,
           int64_t cols);
  // Throws encoder_kit::Error (OUT_OF_MEMORY, DEVICE) led by `who`. Once only.
  void upload(const std::string& who);
  // Bytes uploaded (or to upload).
  size_t bytes() const;

 private:
  struct Entry {
    const uint8_t** codes;
    const float** scales;
    std::vector<uint8_t> q;
    std::vector<float> s;
  };
  std::vector<Entry> plan_;
  void* device_ = nullptr;
  std::string who_;
};

}  // namespace encoder_kit::cuda
