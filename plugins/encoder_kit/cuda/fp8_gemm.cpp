// Fp8GemmPlan: row-major C[m,n] = (A[m,k] W[n,k]^T) * a_scale[m] * w_scale[n]
// through cuBLASLt, laid out as GemmPlan's (gemm.cpp): cuBLASLt's "A" is W
// (transposed, k x n), its "B" is A (k x m), D is n x m. FP8 products want
// exactly that "TN" form. The outer-vector scale of cuBLASLt's A runs along
// D's n rows (w_scale), that of its B along D's m columns (a_scale).
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/form_timing.hpp>
#include <encoder_kit/cuda/fp8.hpp>

#include "lt_problem.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <vector>

namespace encoder_kit::cuda {

namespace {

using Problem = detail::LtProblem;

struct Choice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
};

}  // namespace

bool fp8_supported() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  return major * 10 + minor >= 89;
}

struct Fp8GemmPlan::Impl {
  int64_t m_max = 0, n = 0, k = 0;
  GemmPlan::Epilogue ep = GemmPlan::Epilogue::None;
  bool has_bias() const { return ep != GemmPlan::Epilogue::None; }
  cublasLtHandle_t query_handle = nullptr;  // heuristics only; products use the caller's
  cublasLtMatmulPreference_t pref = nullptr;
  // Stand-ins for the scale and bias pointers in heuristic queries: cuBLASLt
  // refuses outer-vector scaling (CUBLAS_STATUS_INVALID_VALUE) while the
  // pointers are unset, and reads none of them there.
  void* query_pointers = nullptr;
  mutable std::mutex mu;
  mutable std::map<int64_t, Choice> chosen;

  ~Impl() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (query_handle != nullptr) cublasLtDestroy(query_handle);
    if (query_pointers != nullptr) cudaFree(query_pointers);
  }

  int build(Problem& p, int64_t m, const float* a_scale, const float* w_scale,
            const bf16* bias_ptr) const {
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescInit(p.desc(), CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_w = CUBLAS_OP_T, trans_a = CUBLAS_OP_N;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &trans_w, sizeof(trans_w)));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                          &trans_a, sizeof(trans_a)));
    const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
        p.desc(), CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof(outer)));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
        p.desc(), CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof(outer)));
    if (w_scale != nullptr)
      ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          p.desc(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
    if (a_scale != nullptr)
      ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          p.desc(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof(a_scale)));
    const cublasLtEpilogue_t epi = ep == GemmPlan::Epilogue::BiasGeluTanh
                                       ? CUBLASLT_EPILOGUE_GELU_BIAS
                                   : has_bias() ? CUBLASLT_EPILOGUE_BIAS
                                                : CUBLASLT_EPILOGUE_DEFAULT;
    ENCODER_KIT_CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (has_bias()) {
      const int32_t bias_type = CUDA_R_16BF;
      ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          p.desc(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
      if (bias_ptr != nullptr)
        ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
            p.desc(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
    }
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.w(), CUDA_R_8F_E4M3, u(k), u(n), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.a(), CUDA_R_8F_E4M3, u(k), u(m), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.c(), CUDA_R_16BF, u(n), u(m), n));
    return 0;
  }

  int candidates(int64_t m, int wanted, std::vector<cublasLtMatmulHeuristicResult_t>& out) const {
    Problem p;
    const auto* stand_in = static_cast<const float*>(query_pointers);
    if (const int rc = build(p, m, stand_in, stand_in, static_cast<const bf16*>(query_pointers)))
      return rc;
    out.assign(static_cast<size_t>(wanted), cublasLtMatmulHeuristicResult_t{});
    int found = 0;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(
        query_handle, p.desc(), p.w(), p.a(), p.c(), p.c(), pref, wanted, out.data(), &found));
    out.resize(static_cast<size_t>(found));
    ENCODER_KIT_REQUIRE(found > 0);  // no FP8 algorithm for this shape on this device
    return 0;
  }

  int choose(int64_t m, Choice& choice) const {
    {
      std::lock_guard<std::mutex> lock(mu);
      const auto it = chosen.find(m);
      if (it != chosen.end()) {
        choice = it->second;
        return 0;
      }
    }
    std::vector<cublasLtMatmulHeuristicResult_t> found;
    if (const int rc = candidates(m, 1, found)) return rc;
    choice = Choice{found[0].algo, found[0].workspaceSize};
    std::lock_guard<std::mutex> lock(mu);
    chosen[m] = choice;
    return 0;
  }

  int matmul(cublasLtHandle_t handle, const Choice& choice, const e4m3* A, const float* a_scale,
             const e4m3* W, const float* w_scale, const bf16* bias_ptr, bf16* C, int64_t m,
             void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
    ENCODER_KIT_REQUIRE(choice.workspace <= workspace_bytes);
    Problem p;
    if (const int rc = build(p, m, a_scale, w_scale, bias_ptr)) return rc;
    const float alpha = 1.0f, beta = 0.0f;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmul(handle, p.desc(), &alpha, W, p.w(), A, p.a(), &beta, C,
                                          p.c(), C, p.c(), &choice.algo, workspace, workspace_bytes,
                                          stream));
    return 0;
  }

  int check_args(const e4m3* A, const float* a_scale, const e4m3* W, const float* w_scale,
                 const bf16* bias_ptr, const bf16* C, int64_t m) const {
    ENCODER_KIT_REQUIRE(m >= 0 && m <= m_max);
    ENCODER_KIT_REQUIRE(A != nullptr && W != nullptr && C != nullptr);
    ENCODER_KIT_REQUIRE(a_scale != nullptr && w_scale != nullptr);
    ENCODER_KIT_REQUIRE(has_bias() == (bias_ptr != nullptr));
    ENCODER_KIT_REQUIRE(detail::aligned16(A) && detail::aligned16(W) && detail::aligned16(C));
    ENCODER_KIT_REQUIRE(detail::aligned16(a_scale) && detail::aligned16(w_scale));
    ENCODER_KIT_REQUIRE(bias_ptr == nullptr || detail::aligned16(bias_ptr));
    return 0;
  }
};

Fp8GemmPlan::Fp8GemmPlan() = default;
Fp8GemmPlan::~Fp8GemmPlan() = default;
Fp8GemmPlan::Fp8GemmPlan(Fp8GemmPlan&&) noexcept = default;
Fp8GemmPlan& Fp8GemmPlan::operator=(Fp8GemmPlan&&) noexcept = default;

int64_t Fp8GemmPlan::m_max() const {
  return impl_ ? impl_->m_max : 0;
}

int Fp8GemmPlan::initialize(int64_t m_max, int64_t n, int64_t k, GemmPlan::Epilogue ep) {
  using Ep = GemmPlan::Epilogue;
  ENCODER_KIT_REQUIRE(m_max > 0 && n > 0 && k > 0);
  ENCODER_KIT_REQUIRE(ep == Ep::None || ep == Ep::Bias || ep == Ep::BiasGeluTanh);
  ENCODER_KIT_REQUIRE(n % 16 == 0 && k % 16 == 0);  // FP8 products' leading dimensions
  ENCODER_KIT_REQUIRE(fp8_supported());
  auto impl = std::make_unique<Impl>();
  impl->m_max = m_max;
  impl->n = n;
  impl->k = k;
  impl->ep = ep;
  if (const int rc = detail::create_heuristic_query(impl->query_handle, impl->pref)) return rc;
  ENCODER_KIT_CUDA_TRY(cudaMalloc(&impl->query_pointers, 256));
  Choice choice{};
  if (const int rc = impl->choose(m_max, choice)) return rc;
  impl_ = std::move(impl);
  return 0;
}

int Fp8GemmPlan::run(cublasLtHandle_t handle, const e4m3* A, const float* a_scale, const e4m3* W,
                     const float* w_scale, const bf16* bias, bf16* C, int64_t m, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream) const {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr);
  if (const int rc = impl_->check_args(A, a_scale, W, w_scale, bias, C, m)) return rc;
  if (m == 0) return 0;
  Choice choice{};
  if (const int rc = impl_->choose(m, choice)) return rc;
  return impl_->matmul(handle, choice, A, a_scale, W, w_scale, bias, C, m, workspace,
                       workspace_bytes, stream);
}

int Fp8GemmPlan::tune(cublasLtHandle_t handle, const e4m3* A, const float* a_scale, const e4m3* W,
                      const float* w_scale, const bf16* bias, bf16* C, int64_t m, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream, int max_candidates) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr && max_candidates > 0);
  if (const int rc = impl_->check_args(A, a_scale, W, w_scale, bias, C, m)) return rc;
  if (m == 0) return 0;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ENCODER_KIT_CUDA_TRY(cudaStreamIsCapturing(stream, &capturing));
  ENCODER_KIT_REQUIRE(capturing == cudaStreamCaptureStatusNone);
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  if (const int rc = impl_->candidates(m, max_candidates, found)) return rc;
  if (found.size() == 1) {  // nothing to choose between (outer-vector scaling on an H100: one)
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->chosen[m] = Choice{found[0].algo, found[0].workspaceSize};
    return 0;
  }
  constexpr int kRounds = 4, kRuns = 5;
  FormTimes times;
  if (const int rc = time_forms(
          found.size(),
          [&](size_t i) {
            return impl_->matmul(handle, Choice{found[i].algo, found[i].workspaceSize}, A, a_scale,
                                 W, w_scale, bias, C, m, workspace, workspace_bytes, stream);
          },
          stream, kRuns, kRounds, times))
    return rc;
  const int best = detail::fastest_keeping_first(times.best_ms);
  ENCODER_KIT_REQUIRE(best >= 0);  // every proposal failed
  const auto& pick = found[static_cast<size_t>(best)];
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->chosen[m] = Choice{pick.algo, pick.workspaceSize};
  return 0;
}

}  // namespace encoder_kit::cuda
