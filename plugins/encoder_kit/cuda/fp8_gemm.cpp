// Fp8GemmPlan: GemmPlan's TN product (see gemm.cpp) with e4m3 operands. In
// cuBLASLt's column-major terms its "A" is W (k x n, transposed: the TN
// layout FP8 products require on Hopper), its "B" the activations (k x m), D
// bf16 n x m. With outer-vector scaling cuBLASLt multiplies D's (i, j) by
// A-scale[i] and B-scale[j]: the weights' per-channel scales (length n) and
// the activations' per-row ones (length m).
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/form_timing.hpp>
#include <encoder_kit/cuda/fp8_gemm.hpp>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace encoder_kit::cuda {
namespace {

constexpr size_t kMaxCachedM = 4096;  // past this, eager calls re-query instead of growing

struct Choice {
  int64_t m;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
};

struct Problem {
  cublasLtMatmulDescOpaque_t desc_storage;
  cublasLtMatrixLayoutOpaque_t w_storage, a_storage, c_storage;
  cublasLtMatmulDesc_t desc() { return &desc_storage; }
  cublasLtMatrixLayout_t w() { return &w_storage; }
  cublasLtMatrixLayout_t a() { return &a_storage; }
  cublasLtMatrixLayout_t c() { return &c_storage; }
};

}  // namespace

struct Fp8GemmPlan::Impl {
  int64_t m_max = 0, n = 0, k = 0;
  Epilogue ep = Epilogue::None;
  bool residual = false;
  bool fused = false;  // bias (and tanh GELU) in cuBLASLt's epilogue
  cublasLtHandle_t query_handle = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  mutable std::mutex mu;
  mutable std::vector<Choice> cache;

  ~Impl() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (query_handle != nullptr) cublasLtDestroy(query_handle);
  }

  cublasLtEpilogue_t lt_epilogue() const {
    if (!fused || ep == Epilogue::None) return CUBLASLT_EPILOGUE_DEFAULT;
    return ep == Epilogue::BiasGeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  }

  // What runs after cuBLASLt's product: nothing, gelu_bf16, or bias_act_bf16.
  bool after_pass() const { return ep != Epilogue::None && (!fused || ep == Epilogue::BiasGelu); }

  int build(Problem& p, int64_t m, const bf16* bias, const float* w_scale,
            const float* a_scale) const {
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
    const cublasLtEpilogue_t epi = lt_epilogue();
    ENCODER_KIT_CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
      const int32_t bias_type = CUDA_R_16BF;
      ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
          p.desc(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
      if (bias != nullptr)
        ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
            p.desc(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.w(), CUDA_R_8F_E4M3, static_cast<uint64_t>(k),
                                                    static_cast<uint64_t>(n), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.a(), CUDA_R_8F_E4M3, static_cast<uint64_t>(k),
                                                    static_cast<uint64_t>(m), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.c(), CUDA_R_16BF, static_cast<uint64_t>(n),
                                                    static_cast<uint64_t>(m), n));
    return 0;
  }

  int candidates(int64_t m, int wanted, std::vector<cublasLtMatmulHeuristicResult_t>& out) const {
    Problem p;
    if (const int rc = build(p, m, nullptr, nullptr, nullptr)) return rc;
    out.assign(static_cast<size_t>(wanted), cublasLtMatmulHeuristicResult_t{});
    int found = 0;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(
        query_handle, p.desc(), p.w(), p.a(), p.c(), p.c(), pref, wanted, out.data(), &found));
    out.resize(static_cast<size_t>(found));
    // No FP8 algorithm with outer-vector scales for this shape, epilogue or GPU.
    if (found == 0)
      return detail::record_failure(kCublasErrorBase + CUBLAS_STATUS_NOT_SUPPORTED,
                                    "an FP8 outer-vector-scaled algorithm for this problem",
                                    __FILE__, __LINE__);
    return 0;
  }

  int choose(int64_t m, Choice& choice) const {
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const Choice& c : cache)
        if (c.m == m) {
          choice = c;
          return 0;
        }
    }
    std::vector<cublasLtMatmulHeuristicResult_t> found;
    if (const int rc = candidates(m, 1, found)) return rc;
    choice = Choice{m, found[0].algo, found[0].workspaceSize};
    remember(choice);
    return 0;
  }

  void remember(const Choice& choice) const {
    std::lock_guard<std::mutex> lock(mu);
    for (Choice& c : cache)
      if (c.m == choice.m) {
        c = choice;
        return;
      }
    if (cache.size() < kMaxCachedM) cache.push_back(choice);
  }

  int matmul(cublasLtHandle_t handle, const Choice& choice, const uint8_t* A, const float* a_scale,
             const uint8_t* W, const float* w_scale, const bf16* bias, const bf16* residual,
             bf16* C, int64_t m, void* workspace, size_t ws_bytes, cudaStream_t stream) const {
    Problem p;
    if (const int rc = build(p, m, bias, w_scale, a_scale)) return rc;
    const float alpha = 1.0f, beta = residual != nullptr ? 1.0f : 0.0f;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmul(handle, p.desc(), &alpha, W, p.w(), A, p.a(), &beta,
                                          residual != nullptr ? residual : C, p.c(), C, p.c(),
                                          &choice.algo, workspace, ws_bytes, stream));
    if (!after_pass()) return 0;
    if (fused)  // the bias is in; the erf GELU is not cuBLASLt's
      return gelu_bf16(C, C, m * n, false, stream);
    const Fp8Act act = ep == Epilogue::BiasGelu       ? Fp8Act::GeluErf
                       : ep == Epilogue::BiasGeluTanh ? Fp8Act::GeluTanh
                                                      : Fp8Act::None;
    return bias_act_bf16(C, bias, m, n, act, stream);
  }

  int check_args(const uint8_t* A, const float* a_scale, const uint8_t* W, const float* w_scale,
                 const bf16* bias, const bf16* residual, const bf16* C, int64_t m) const {
    ENCODER_KIT_REQUIRE(m >= 0 && m <= m_max);
    ENCODER_KIT_REQUIRE(A != nullptr && a_scale != nullptr && W != nullptr && w_scale != nullptr &&
                        C != nullptr);
    ENCODER_KIT_REQUIRE((ep == Epilogue::None) == (bias == nullptr));
    ENCODER_KIT_REQUIRE((residual != nullptr) == this->residual);
    ENCODER_KIT_REQUIRE(detail::aligned16(A) && detail::aligned16(W) && detail::aligned16(C));
    ENCODER_KIT_REQUIRE(detail::aligned16(a_scale) && detail::aligned16(w_scale));
    ENCODER_KIT_REQUIRE(bias == nullptr || detail::aligned16(bias));
    ENCODER_KIT_REQUIRE(residual == nullptr || detail::aligned16(residual));
    return 0;
  }

  // The first cuBLASLt proposal for m_max under the current `fused` setting.
  int probe() const {
    Choice choice{};
    return choose(m_max, choice);
  }
};

size_t Fp8GemmPlan::workspace_bytes() {
  return GemmPlan::workspace_bytes();
}

Fp8GemmPlan::Fp8GemmPlan() = default;
Fp8GemmPlan::~Fp8GemmPlan() = default;
Fp8GemmPlan::Fp8GemmPlan(Fp8GemmPlan&&) noexcept = default;
Fp8GemmPlan& Fp8GemmPlan::operator=(Fp8GemmPlan&&) noexcept = default;

int64_t Fp8GemmPlan::m_max() const {
  return impl_ ? impl_->m_max : 0;
}
int64_t Fp8GemmPlan::n() const {
  return impl_ ? impl_->n : 0;
}
int64_t Fp8GemmPlan::k() const {
  return impl_ ? impl_->k : 0;
}
bool Fp8GemmPlan::epilogue_fused() const {
  return impl_ && impl_->fused;
}

int Fp8GemmPlan::initialize(int64_t m_max, int64_t n, int64_t k, Epilogue ep, bool add_residual,
                            bool fuse_epilogue) {
  ENCODER_KIT_REQUIRE(m_max > 0 && n > 0 && k > 0);
  // cuBLASLt's FP8 rules: 16-byte aligned leading dimensions of the e4m3
  // operands (k), and of the bf16 output (n).
  ENCODER_KIT_REQUIRE(k % 16 == 0 && n % 8 == 0);
  ENCODER_KIT_REQUIRE(
      !(add_residual && (ep == Epilogue::BiasGelu || ep == Epilogue::BiasGeluTanh)));
  auto impl = std::make_unique<Impl>();
  impl->m_max = m_max;
  impl->n = n;
  impl->k = k;
  impl->ep = ep;
  impl->residual = add_residual;
  ENCODER_KIT_CUBLAS_TRY(cublasLtCreate(&impl->query_handle));
  ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&impl->pref));
  const uint64_t ws = workspace_bytes();
  ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      impl->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t align = 16;
  for (const auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ENCODER_KIT_CUBLAS_TRY(
        cublasLtMatmulPreferenceSetAttribute(impl->pref, attr, &align, sizeof(align)));
  // The fused epilogue where cuBLASLt has it for FP8, else the separate pass;
  // either way it fails here, not at the first run, when nothing fits.
  impl->fused = fuse_epilogue && ep != Epilogue::None;
  if (impl->fused && impl->probe() != 0) {
    impl->cache.clear();
    impl->fused = false;
  }
  if (const int rc = impl->probe()) return rc;
  impl_ = std::move(impl);
  return 0;
}

int Fp8GemmPlan::prepare(int64_t m) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && m > 0 && m <= impl_->m_max);
  Choice choice{};
  return impl_->choose(m, choice);
}

int Fp8GemmPlan::run(cublasLtHandle_t handle, const uint8_t* A, const float* a_scale,
                     const uint8_t* W, const float* w_scale, const bf16* bias, const bf16* residual,
                     bf16* C, int64_t m, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream) const {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr);
  if (const int rc = impl_->check_args(A, a_scale, W, w_scale, bias, residual, C, m)) return rc;
  if (m == 0) return 0;
  Choice choice{};
  if (const int rc = impl_->choose(m, choice)) return rc;
  ENCODER_KIT_REQUIRE(choice.workspace <= workspace_bytes && (choice.workspace == 0 || workspace));
  return impl_->matmul(handle, choice, A, a_scale, W, w_scale, bias, residual, C, m, workspace,
                       workspace_bytes, stream);
}

int Fp8GemmPlan::tune(cublasLtHandle_t handle, const uint8_t* A, const float* a_scale,
                      const uint8_t* W, const float* w_scale, const bf16* bias,
                      const bf16* residual, bf16* C, int64_t m, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream, int max_candidates) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr && max_candidates > 0);
  if (const int rc = impl_->check_args(A, a_scale, W, w_scale, bias, residual, C, m)) return rc;
  if (m == 0) return 0;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ENCODER_KIT_CUDA_TRY(cudaStreamIsCapturing(stream, &capturing));
  ENCODER_KIT_REQUIRE(capturing == cudaStreamCaptureStatusNone);
  std::vector<cublasLtMatmulHeuristicResult_t> proposals;
  if (const int rc = impl_->candidates(m, max_candidates, proposals)) return rc;
  std::vector<Choice> found;  // the heuristic's first stays first
  for (const auto& r : proposals) found.push_back(Choice{m, r.algo, r.workspaceSize});
  // As GemmPlan::tune: graph replays in alternating rounds (form_timing.hpp).
  constexpr int kRounds = 4, kRuns = 5;
  FormTimes times;
  if (const int rc = time_forms(
          found.size(),
          [&](size_t i) {
            if (found[i].workspace > workspace_bytes)
              return static_cast<int>(cudaErrorInvalidValue);
            return impl_->matmul(handle, found[i], A, a_scale, W, w_scale, bias, residual, C, m,
                                 workspace, workspace_bytes, stream);
          },
          stream, kRuns, kRounds, times))
    return rc;
  const std::vector<float>& ms = times.best_ms;
  int best = -1;
  for (size_t i = 0; i < found.size(); ++i)
    if (ms[i] >= 0.0f && (best < 0 || ms[i] < ms[static_cast<size_t>(best)]))
      best = static_cast<int>(i);
  ENCODER_KIT_REQUIRE(best >= 0);  // every proposal failed
  // The heuristic's first stays unless another is clearly faster (noise).
  if (best != 0 && ms[0] >= 0.0f && ms[static_cast<size_t>(best)] > 0.95f * ms[0]) best = 0;
  impl_->remember(found[static_cast<size_t>(best)]);
  return 0;
}

}  // namespace encoder_kit::cuda
