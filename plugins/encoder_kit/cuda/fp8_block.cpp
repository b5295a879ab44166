#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/fp8_block.hpp>

namespace encoder_kit::cuda {

int Fp8PreNormBlock::initialize(int64_t m_max, int64_t d, int64_t inter, float eps) {
  using Ep = GemmPlan::Epilogue;
  if (const int rc = qkv_.initialize(m_max, 3 * d, d, Ep::Bias, false)) return rc;
  if (const int rc = proj_.initialize(m_max, d, d, Ep::Bias, true)) return rc;
  if (const int rc = fc1_.initialize(m_max, inter, d, Ep::BiasGeluTanh, false)) return rc;
  if (const int rc = fc2_.initialize(m_max, d, inter, Ep::Bias, true)) return rc;
  d_ = d;
  inter_ = inter;
  eps_ = eps;
  return 0;
}

int Fp8PreNormBlock::run(cublasLtHandle_t handle, const Fp8BlockWeights& w,
                         const Fp8BlockBuffers& b, int64_t rows,
                         const std::function<int()>& attention, bool tune, cudaStream_t s,
                         std::string& what) {
  ENCODER_KIT_REQUIRE(d_ > 0);  // initialized
  const size_t ws = GemmPlan::workspace_bytes();
  auto product = [&](Fp8GemmPlan& plan, const Fp8Linear& l, const bf16* residual, bf16* out) {
    return tune ? plan.tune(handle, b.q, b.q_scale, l.codes, l.scales, l.bias, residual, out, rows,
                            b.gemm_ws, ws, s)
                : plan.run(handle, b.q, b.q_scale, l.codes, l.scales, l.bias, residual, out, rows,
                           b.gemm_ws, ws, s);
  };
  // Each step names itself in `what` before it runs.
  auto step = [&](const char* name, int rc) {
    what = name;
    return rc;
  };
  int rc = 0;
  if ((rc = step("norm1", layer_norm_bf16(b.x, w.ln1_w, w.ln1_b, b.normed, rows, d_, eps_, s))) ||
      (rc = step("norm1 in FP8",
                 quantize_rows_e4m3(b.normed, d_, b.q, b.q_scale, rows, d_, -1.0f, s))) ||
      (rc = step("qkv in FP8", product(qkv_, w.qkv, nullptr, b.qkv))))
    return rc;
  if (!tune && (rc = step("attention", attention()))) return rc;
  if ((rc = step("attention in FP8",
                 quantize_rows_e4m3(b.attn, d_, b.q, b.q_scale, rows, d_, -1.0f, s))) ||
      (rc = step("proj in FP8", product(proj_, w.proj, b.x, b.x))) ||
      (rc = step("norm2", layer_norm_bf16(b.x, w.ln2_w, w.ln2_b, b.normed, rows, d_, eps_, s))) ||
      (rc = step("norm2 in FP8",
                 quantize_rows_e4m3(b.normed, d_, b.q, b.q_scale, rows, d_, -1.0f, s))) ||
      (rc = step("fc1 in FP8", product(fc1_, w.fc1, nullptr, b.act))) ||
      (rc = step("fc1 in FP8",
                 quantize_rows_e4m3(b.act, inter_, b.q, b.q_scale, rows, inter_, -1.0f, s))) ||
      (rc = step("fc2 in FP8", product(fc2_, w.fc2, b.x, b.x))))
    return rc;
  what.clear();
  return 0;
}

}  // namespace encoder_kit::cuda
