#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/fp8_block.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/fp8.hpp>

namespace encoder_kit::cuda {

void add_fp8_block(DeviceWeights& weights, Fp8BlockWeights& out, const PreNormBlockHost& h,
                   int64_t d, const std::array<std::string, 3>& names) {
  std::vector<float> qkv_w = h.qkv_w, qkv_b = h.qkv_b, fc1_w = h.fc1_w, fc1_b = h.fc1_b;
  const int64_t qkv_rows = static_cast<int64_t>(qkv_w.size()) / d,
                fc1_rows = static_cast<int64_t>(fc1_w.size()) / d;
  encoder_kit::fold_layer_norm(qkv_w, qkv_b, qkv_rows, d, h.ln1_w, h.ln1_b);
  encoder_kit::fold_layer_norm(fc1_w, fc1_b, fc1_rows, d, h.ln2_w, h.ln2_b);
  weights.add_e4m3(&out.qkv.codes, &out.qkv.scales, qkv_w, qkv_rows, names[0]);
  weights.add_e4m3(&out.fc1.codes, &out.fc1.scales, fc1_w, fc1_rows, names[1]);
  weights.add_e4m3(&out.fc2.codes, &out.fc2.scales, h.fc2_w, d, names[2]);
  weights.add(&out.proj_w, h.proj_w);
  weights.add(&out.proj_b, h.proj_b);
  weights.add(&out.qkv.bias, std::move(qkv_b));
  weights.add(&out.fc1.bias, std::move(fc1_b));
  weights.add(&out.fc2.bias, h.fc2_b);
}

void require_fp8_block(const std::string& who, int64_t d, int64_t inter, bool gelu_tanh) {
  const std::string key = who + ": precision = \"fp8_linear\" needs ";
  const std::string fix = ": set precision = \"bf16\"";
  if (!fp8_supported())
    fail(EG_ERR_INVALID_ARGUMENT,
         key + "a GPU with FP8 tensor cores (compute capability 8.9 or later)" + fix);
  if (d % 16 != 0 || inter % 16 != 0)
    fail(EG_ERR_INVALID_ARGUMENT, key + "hidden_size and intermediate_size each a multiple of 16 " +
                                      "(the FP8 products' rule), got " + std::to_string(d) +
                                      " and " + std::to_string(inter) + fix);
  if (d > detail::kHeldRowCols)
    fail(EG_ERR_INVALID_ARGUMENT,
         key + "hidden_size at most " + std::to_string(detail::kHeldRowCols) + ", got " +
             std::to_string(d) + " (the LayerNorms run inside the quantisation)" + fix);
  if (!gelu_tanh && inter > detail::kHeldRowCols)
    fail(EG_ERR_INVALID_ARGUMENT,
         key + "intermediate_size at most " + std::to_string(detail::kHeldRowCols) +
             " with the exact GELU, got " + std::to_string(inter) +
             " (the GELU runs inside the quantisation of fc1's output)" + fix);
}

int Fp8PreNormBlock::initialize(int64_t m_max, int64_t d, int64_t inter, float eps,
                                bool gelu_tanh) {
  using Ep = GemmPlan::Epilogue;
  ENCODER_KIT_REQUIRE(d <= detail::kHeldRowCols);  // the norms' rows are held in registers
  ENCODER_KIT_REQUIRE(gelu_tanh || inter <= detail::kHeldRowCols);  // as the exact GELU's
  if (const int rc = qkv_.initialize(m_max, 3 * d, d, Ep::Bias)) return rc;
  if (const int rc = fc1_.initialize(m_max, inter, d, gelu_tanh ? Ep::BiasGeluTanh : Ep::Bias))
    return rc;
  if (const int rc = fc2_.initialize(m_max, d, inter, Ep::Bias)) return rc;
  d_ = d;
  inter_ = inter;
  eps_ = eps;
  gelu_tanh_ = gelu_tanh;
  return 0;
}

int Fp8PreNormBlock::run(cublasLtHandle_t handle, const Fp8BlockWeights& w, GemmPlan& proj,
                         const Fp8BlockBuffers& b, int64_t rows,
                         const std::function<int()>& attention, bool tune, cudaStream_t s,
                         std::string& what) {
  ENCODER_KIT_REQUIRE(d_ > 0);  // initialized
  const size_t ws = GemmPlan::workspace_bytes();
  auto product = [&](Fp8GemmPlan& plan, const Fp8Linear& l, bf16* out) {
    return tune ? plan.tune(handle, b.q, b.q_scale, l.codes, l.scales, l.bias, out, rows, b.gemm_ws,
                            ws, s)
                : plan.run(handle, b.q, b.q_scale, l.codes, l.scales, l.bias, out, rows, b.gemm_ws,
                           ws, s);
  };
  // Each step names itself in `what` before it runs.
  auto step = [&](const char* name, int rc) {
    what = name;
    return rc;
  };
  int rc = 0;
  if ((rc = step("norm1 in FP8",
                 quantize_centred_rows_e4m3(b.x, d_, b.q, b.q_scale, rows, d_, eps_, s))) ||
      (rc = step("qkv in FP8", product(qkv_, w.qkv, b.qkv))))
    return rc;
  if (!tune && (rc = step("attention", attention()))) return rc;
  if ((rc = step("proj", tune ? proj.tune(handle, b.attn, w.proj_w, w.proj_b, b.x, b.x, rows,
                                          b.gemm_ws, ws, s)
                              : proj.run(handle, b.attn, w.proj_w, w.proj_b, b.x, b.x, rows,
                                         b.gemm_ws, ws, s))) ||
      (rc = step("norm2 in FP8",
                 quantize_centred_rows_e4m3(b.x, d_, b.q, b.q_scale, rows, d_, eps_, s))) ||
      (rc = step("fc1 in FP8", product(fc1_, w.fc1, b.act))) ||
      (rc = step("fc1's output in FP8",
                 gelu_tanh_
                     ? quantize_rows_e4m3(b.act, inter_, b.q, b.q_scale, rows, inter_, -1.0f, s)
                     : gelu_quantize_rows_e4m3(b.act, b.q, b.q_scale, rows, inter_, s))) ||
      // fc2 writes into attn (free once proj has read it), then adds to x:
      // cuBLASLt's FP8 products have no exact residual form (fp8.hpp).
      (rc = step("fc2 in FP8", product(fc2_, w.fc2, b.attn))) ||
      (rc = step("fc2's residual", add_bf16(b.x, b.attn, b.x, rows * d_, s))))
    return rc;
  what.clear();
  return 0;
}

}  // namespace encoder_kit::cuda
