// GemmPlan: row-major C[m,n] = A[m,k] · W[n,k]^T through cuBLASLt, which is
// column-major. A row-major [r,c] matrix is a column-major [c,r] one, so the
// product is computed as C^T[n,m] = W[n,k] · A^T[k,m]: cuBLASLt's "A" operand
// is W (stored k x n, transposed), its "B" is A (k x m), D is n x m with ld n,
// and the bias runs along D's rows, i.e. along n as a Linear layer wants.
//
// Descriptors and layouts are built per call in stack storage
// (cublasLt*Init on the opaque structs): no allocation, nothing shared between
// threads. Only the algorithm choice is cached, per row count m; tune()'s
// choices can also persist across processes in a TuningCache.
#include <encoder_kit/cuda/check.hpp>
#include <encoder_kit/cuda/form_timing.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/tuning_cache.hpp>

#include "lt_problem.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace encoder_kit::cuda {

namespace detail {
namespace {
// Each thread's last failure, by thread id rather than in a thread_local: a
// plugin library holding thread-local storage leaves a dynamic TLS entry
// behind when it is unloaded (tests/test_plugin_unload.cpp checks there is
// none). One entry per thread that ever failed; each stays valid until that
// thread fails again.
std::mutex g_detail_mutex;
std::map<std::thread::id, std::string> g_last_detail;
}  // namespace

int record_failure(int code, const char* expr, const char* file, int line) {
  std::string detail = std::string(expr) + " at " + file + ":" + std::to_string(line);
  const std::lock_guard<std::mutex> lock(g_detail_mutex);
  g_last_detail[std::this_thread::get_id()] = std::move(detail);
  return code;
}
}  // namespace detail

const char* last_error_detail() {
  const std::lock_guard<std::mutex> lock(detail::g_detail_mutex);
  const auto it = detail::g_last_detail.find(std::this_thread::get_id());
  return it == detail::g_last_detail.end() ? "" : it->second.c_str();
}

const char* error_string(int code) {
  if (code == 0) return "no error";
  if (code >= kCublasErrorBase)
    return cublasLtGetStatusString(static_cast<cublasStatus_t>(code - kCublasErrorBase));
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

namespace {

constexpr int kMaxCachedM = 4096;  // past this, eager calls re-query instead of growing
// tune() also times split-K forms up to this many rows (see add_split_k_forms).
constexpr int64_t kSplitKMaxRows = 2048;

// An algorithm for one row count: cuBLASLt's (own_splits == 0), or our Hopper
// kernel (gemm_sm90.cu) with k shared by own_splits blocks.
struct Choice {
  int64_t m;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  int own_splits = 0;
};

constexpr char kOwnPrefix[] = "sm90:s=";

using Problem = detail::LtProblem;

cublasLtEpilogue_t lt_epilogue(GemmPlan::Epilogue ep) {
  switch (ep) {
    case GemmPlan::Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmPlan::Epilogue::BiasGeluTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;  // cuBLASLt's GELU is the tanh form
    case GemmPlan::Epilogue::Bias:
    case GemmPlan::Epilogue::BiasGelu:  // erf GELU: a separate pass after the product
      break;
  }
  return CUBLASLT_EPILOGUE_BIAS;
}

const char* epilogue_name(GemmPlan::Epilogue ep) {
  switch (ep) {
    case GemmPlan::Epilogue::None: return "none";
    case GemmPlan::Epilogue::Bias: return "bias";
    case GemmPlan::Epilogue::BiasGelu: return "bias+gelu";
    case GemmPlan::Epilogue::BiasGeluTanh: return "bias+gelutanh";
  }
  return "?";
}

// A choice as the tuning cache stores it: the algorithm's opaque words in hex,
// then its workspace size ("<128 hex>:<bytes>"); our kernel as "sm90:s=<splits>".
std::string encode_choice(const cublasLtMatmulAlgo_t& algo, size_t workspace) {
  std::string out;
  char buf[17];
  for (const uint64_t word : algo.data) {
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(word));
    out += buf;
  }
  return out + ":" + std::to_string(workspace);
}

std::string encode_choice(const Choice& c) {
  return c.own_splits > 0 ? kOwnPrefix + std::to_string(c.own_splits)
                          : encode_choice(c.algo, c.workspace);
}

// The splits of an encoded choice of our kernel; 0 when it is not one.
int decode_own_splits(const std::string& text) {
  const size_t prefix = sizeof(kOwnPrefix) - 1;
  if (text.size() != prefix + 1 || text.compare(0, prefix, kOwnPrefix) != 0) return 0;
  const char d = text[prefix];
  return d == '1' || d == '2' || d == '4' || d == '8' ? d - '0' : 0;
}

bool decode_choice(const std::string& text, cublasLtMatmulAlgo_t& algo, size_t& workspace) {
  constexpr size_t kWords = sizeof(algo.data) / sizeof(algo.data[0]);
  if (text.size() < kWords * 16 + 2 || text[kWords * 16] != ':') return false;
  for (size_t w = 0; w < kWords; ++w) {
    uint64_t v = 0;
    for (size_t i = 0; i < 16; ++i) {
      const char c = text[w * 16 + i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      v = v << 4 | static_cast<uint64_t>(d);
    }
    algo.data[w] = v;
  }
  const std::string ws = text.substr(kWords * 16 + 1);
  if (ws.empty() || ws.size() > 15 || ws.find_first_not_of("0123456789") != std::string::npos)
    return false;
  workspace = static_cast<size_t>(std::stoull(ws));
  return true;
}

}  // namespace

struct GemmPlan::Impl {
  int64_t m_max = 0, n = 0, k = 0;
  Epilogue ep = Epilogue::None;
  bool residual = false;
  bool own = false;  // our Hopper kernel can run this problem (tune() times it too)
  cublasLtHandle_t query_handle = nullptr;  // heuristics only; products use the caller's
  cublasLtMatmulPreference_t pref = nullptr;
  mutable std::mutex mu;
  mutable std::vector<Choice> cache;
  std::shared_ptr<TuningCache> tuning;  // persistent choices, shared with other plans
  int64_t timed = 0, from_cache = 0;

  // Everything a stored algorithm depends on besides the device and versions.
  std::string problem_key(int64_t m, size_t workspace_bytes) const {
    return "gemm:m=" + std::to_string(m) + ",n=" + std::to_string(n) + ",k=" + std::to_string(k) +
           ",a=bf16,w=bf16,c=bf16,acc=f32,op=TN,ep=" + epilogue_name(ep) +
           ",res=" + (residual ? "1" : "0") + ",ws=" + std::to_string(workspace_bytes) +
           ",align=16" + (split_k_search(m) ? ",search=splitk" : "") + (own ? ",own=sm90v1" : "");
  }

  // Our kernel's forms worth timing at m: unsplit, and k shared by 2, 4 or 8
  // blocks up to the kernel's own automatic choice (where the tiles alone
  // leave multiprocessors idle).
  std::vector<int> own_splits_for(int64_t m) const {
    if (!own) return {};
    std::vector<int> out;
    const int most = detail::gemm_sm90_auto_splits(m, n, k);
    for (int s = 1; s <= most; s *= 2) out.push_back(s);
    return out;
  }

  // An encoded choice (the cache's form) for m, when it decodes, fits
  // workspace_bytes and cuBLASLt still accepts it for this problem.
  bool checked_choice(int64_t m, const std::string& text, size_t workspace_bytes,
                      Choice& out) const {
    if (const int splits = decode_own_splits(text); splits > 0) {
      if (!own) return false;  // another GPU, or the epilogue is not ours to run
      out = Choice{m, {}, 0, splits};
      return true;
    }
    cublasLtMatmulAlgo_t algo{};
    size_t ws = 0;
    if (!decode_choice(text, algo, ws) || ws > workspace_bytes) return false;
    Problem p;
    if (build(p, m, nullptr) != 0) return false;
    cublasLtMatmulHeuristicResult_t result{};
    if (cublasLtMatmulAlgoCheck(query_handle, p.desc(), p.w(), p.a(), p.c(), p.c(), &algo,
                                &result) != CUBLAS_STATUS_SUCCESS ||
        result.workspaceSize > workspace_bytes)
      return false;
    out = Choice{m, algo, std::max(ws, result.workspaceSize)};
    return true;
  }

  // The cached choice for m when cuBLASLt still accepts it for this problem.
  bool cached_choice(int64_t m, size_t workspace_bytes, Choice& out) const {
    const std::optional<std::string> text = tuning->find(problem_key(m, workspace_bytes));
    return text && checked_choice(m, *text, workspace_bytes, out);
  }

  ~Impl() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (query_handle != nullptr) cublasLtDestroy(query_handle);
  }

  int build(Problem& p, int64_t m, const bf16* bias) const {
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescInit(p.desc(), CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_w = CUBLAS_OP_T, trans_a = CUBLAS_OP_N;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &trans_w, sizeof(trans_w)));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p.desc(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                          &trans_a, sizeof(trans_a)));
    const cublasLtEpilogue_t epi = lt_epilogue(ep);
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
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.w(), CUDA_R_16BF, static_cast<uint64_t>(k),
                                                    static_cast<uint64_t>(n), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.a(), CUDA_R_16BF, static_cast<uint64_t>(k),
                                                    static_cast<uint64_t>(m), k));
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatrixLayoutInit(p.c(), CUDA_R_16BF, static_cast<uint64_t>(n),
                                                    static_cast<uint64_t>(m), n));
    return 0;
  }

  // cuBLASLt's proposals for m, best first; with split_k, also split-K forms
  // of the first few (appended, so the heuristic's first stays first;
  // `proposals`, when given, receives how many came from the heuristic).
  int candidates(int64_t m, int wanted, std::vector<cublasLtMatmulHeuristicResult_t>& out,
                 bool split_k = false, size_t* proposals = nullptr) const {
    Problem p;
    if (const int rc = build(p, m, nullptr)) return rc;
    out.assign(static_cast<size_t>(wanted), cublasLtMatmulHeuristicResult_t{});
    int found = 0;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(
        query_handle, p.desc(), p.w(), p.a(), p.c(), p.c(), pref, wanted, out.data(), &found));
    out.resize(static_cast<size_t>(found));
    ENCODER_KIT_REQUIRE(found > 0);  // no algorithm for this shape / alignment
    if (proposals != nullptr) *proposals = out.size();
    if (split_k) add_split_k_forms(p, out);
    return 0;
  }

  // Few rows (one small image: 256) leave most multiprocessors idle: a 256 x
  // 1280 output is 20 tiles of 128 x 128 for 132 of them. Splitting K gives
  // each tile several blocks (partial sums reduced in the workspace). The
  // heuristic rarely proposes it, so tune() also times split-K forms of its
  // first proposals, where cuBLASLt accepts them.
  static bool split_k_search(int64_t m) { return m <= kSplitKMaxRows; }

  void add_split_k_forms(Problem& p, std::vector<cublasLtMatmulHeuristicResult_t>& out) const {
    const size_t bases = std::min<size_t>(out.size(), 4);
    for (size_t b = 0; b < bases; ++b) {
      int32_t supported = 0;
      size_t written = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&out[b].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                                            &supported, sizeof(supported),
                                            &written) != CUBLAS_STATUS_SUCCESS ||
          supported == 0)
        continue;
      uint32_t schemes = 0;
      if (cublasLtMatmulAlgoCapGetAttribute(&out[b].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK,
                                            &schemes, sizeof(schemes),
                                            &written) != CUBLAS_STATUS_SUCCESS)
        continue;
      // fp32 partial sums only (the unsplit product's precision): bf16 ones
      // would lose bits that tuning, which looks at time alone, cannot see.
      const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      if ((schemes & scheme) == 0) continue;
      for (const int32_t splits : {2, 3, 4, 6, 8}) {
        if (static_cast<int64_t>(splits) * 64 > k) break;  // slices of at least 64
        cublasLtMatmulHeuristicResult_t r = out[b];
        if (cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                 sizeof(splits)) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                 &scheme, sizeof(scheme)) != CUBLAS_STATUS_SUCCESS)
          continue;
        cublasLtMatmulHeuristicResult_t checked{};
        if (cublasLtMatmulAlgoCheck(query_handle, p.desc(), p.w(), p.a(), p.c(), p.c(), &r.algo,
                                    &checked) != CUBLAS_STATUS_SUCCESS ||
            checked.workspaceSize > workspace_bytes())
          continue;
        r.workspaceSize = checked.workspaceSize;
        out.push_back(r);
      }
    }
  }

  // The algorithm for m: cached, else the heuristic's first (cached if room).
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

  int matmul(cublasLtHandle_t handle, const Choice& choice, const bf16* A, const bf16* W,
             const bf16* bias, const bf16* residual, bf16* C, int64_t m, void* workspace,
             size_t workspace_bytes, cudaStream_t stream) const {
    if (choice.own_splits > 0)
      return detail::gemm_sm90_bf16(A, W, bias, residual, C, m, n, k, choice.own_splits, stream);
    const cublasLtMatmulAlgo_t& algo = choice.algo;
    Problem p;
    if (const int rc = build(p, m, bias)) return rc;
    const float alpha = 1.0f, beta = residual != nullptr ? 1.0f : 0.0f;
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmul(handle, p.desc(), &alpha, W, p.w(), A, p.a(), &beta,
                                          residual != nullptr ? residual : C, p.c(), C, p.c(),
                                          &algo, workspace, workspace_bytes, stream));
    if (ep == Epilogue::BiasGelu) return gelu_bf16(C, C, m * n, false, stream);
    return 0;
  }

  int check_args(const bf16* A, const bf16* W, const bf16* bias, const bf16* residual,
                 const bf16* C, int64_t m) const {
    ENCODER_KIT_REQUIRE(m >= 0 && m <= m_max);
    ENCODER_KIT_REQUIRE(A != nullptr && W != nullptr && C != nullptr);
    ENCODER_KIT_REQUIRE((ep == Epilogue::None) == (bias == nullptr));
    ENCODER_KIT_REQUIRE(residual_ok(residual));
    // The heuristic was asked for 16-byte alignment; less would fail in cuBLASLt.
    ENCODER_KIT_REQUIRE(detail::aligned16(A) && detail::aligned16(W) && detail::aligned16(C));
    ENCODER_KIT_REQUIRE(bias == nullptr || detail::aligned16(bias));
    ENCODER_KIT_REQUIRE(residual == nullptr || detail::aligned16(residual));
    return 0;
  }
  bool residual_ok(const bf16* r) const { return residual == (r != nullptr); }
};

namespace detail {
int create_heuristic_query(cublasLtHandle_t& handle, cublasLtMatmulPreference_t& pref) {
  ENCODER_KIT_CUBLAS_TRY(cublasLtCreate(&handle));
  ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = GemmPlan::workspace_bytes();
  ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t align = 16;
  for (const auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    ENCODER_KIT_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  return 0;
}
}  // namespace detail

size_t GemmPlan::workspace_bytes() {
  return size_t{32} << 20;
}

GemmPlan::GemmPlan() = default;
GemmPlan::~GemmPlan() = default;
GemmPlan::GemmPlan(GemmPlan&&) noexcept = default;
GemmPlan& GemmPlan::operator=(GemmPlan&&) noexcept = default;

int64_t GemmPlan::m_max() const {
  return impl_ ? impl_->m_max : 0;
}
int64_t GemmPlan::n() const {
  return impl_ ? impl_->n : 0;
}
int64_t GemmPlan::k() const {
  return impl_ ? impl_->k : 0;
}

void GemmPlan::set_tuning_cache(std::shared_ptr<TuningCache> cache) {
  if (impl_) impl_->tuning = std::move(cache);
}
int64_t GemmPlan::tunings_timed() const {
  return impl_ ? impl_->timed : 0;
}
int64_t GemmPlan::tunings_from_cache() const {
  return impl_ ? impl_->from_cache : 0;
}
std::string GemmPlan::choice_for(int64_t m) const {
  if (!impl_) return {};
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const Choice& c : impl_->cache)
    if (c.m == m) return encode_choice(c);
  return {};
}

int GemmPlan::candidates_for(int64_t m, int max_candidates, std::vector<std::string>& encoded,
                             int* split_k_forms) const {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && m > 0 && m <= impl_->m_max && max_candidates > 0);
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  size_t proposals = 0;
  if (const int rc =
          impl_->candidates(m, max_candidates, found, Impl::split_k_search(m), &proposals))
    return rc;
  if (split_k_forms != nullptr) *split_k_forms = static_cast<int>(found.size() - proposals);
  encoded.clear();
  for (const auto& r : found) encoded.push_back(encode_choice(r.algo, r.workspaceSize));
  for (const int splits : impl_->own_splits_for(m))
    encoded.push_back(kOwnPrefix + std::to_string(splits));
  return 0;
}

int GemmPlan::use_choice(int64_t m, const std::string& encoded) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && m > 0 && m <= impl_->m_max);
  Choice choice{};
  // Not decodable, over run()'s workspace, or refused by cuBLASLt.
  ENCODER_KIT_REQUIRE(impl_->checked_choice(m, encoded, workspace_bytes(), choice));
  impl_->remember(choice);
  return 0;
}

int GemmPlan::initialize(int64_t m_max, int64_t n, int64_t k, Epilogue ep, bool add_residual) {
  ENCODER_KIT_REQUIRE(m_max > 0 && n > 0 && k > 0);
  ENCODER_KIT_REQUIRE(
      !(add_residual && (ep == Epilogue::BiasGelu || ep == Epilogue::BiasGeluTanh)));
  auto impl = std::make_unique<Impl>();
  impl->m_max = m_max;
  impl->n = n;
  impl->k = k;
  impl->ep = ep;
  impl->residual = add_residual;
  impl->own = (ep == Epilogue::None || ep == Epilogue::Bias) && n % 8 == 0 && k % 8 == 0 &&
              k <= int64_t{0x7fffffff} && detail::sm90_gemm_supported();
  if (const int rc = detail::create_heuristic_query(impl->query_handle, impl->pref)) return rc;
  // Fails here, not at the first run, when cuBLASLt has nothing for the shape.
  Choice choice{};
  if (const int rc = impl->choose(m_max, choice)) return rc;
  impl_ = std::move(impl);
  return 0;
}

int GemmPlan::prepare(int64_t m) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr);
  ENCODER_KIT_REQUIRE(m > 0 && m <= impl_->m_max);
  Choice choice{};
  return impl_->choose(m, choice);
}

int GemmPlan::run(cublasLtHandle_t handle, const bf16* A, const bf16* W, const bf16* bias,
                  const bf16* residual, bf16* C, int64_t m, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream) const {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr);
  if (const int rc = impl_->check_args(A, W, bias, residual, C, m)) return rc;
  if (m == 0) return 0;
  Choice choice{};
  if (const int rc = impl_->choose(m, choice)) return rc;
  ENCODER_KIT_REQUIRE(choice.workspace <= workspace_bytes && (choice.workspace == 0 || workspace));
  return impl_->matmul(handle, choice, A, W, bias, residual, C, m, workspace, workspace_bytes,
                       stream);
}

int GemmPlan::tune(cublasLtHandle_t handle, const bf16* A, const bf16* W, const bf16* bias,
                   const bf16* residual, bf16* C, int64_t m, void* workspace,
                   size_t workspace_bytes, cudaStream_t stream, int max_candidates) {
  ENCODER_KIT_REQUIRE(impl_ != nullptr && handle != nullptr && max_candidates > 0);
  if (const int rc = impl_->check_args(A, W, bias, residual, C, m)) return rc;
  if (m == 0) return 0;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ENCODER_KIT_CUDA_TRY(cudaStreamIsCapturing(stream, &capturing));
  ENCODER_KIT_REQUIRE(capturing == cudaStreamCaptureStatusNone);
  if (impl_->tuning) {
    Choice cached{};
    if (impl_->cached_choice(m, workspace_bytes, cached)) {
      impl_->remember(cached);
      ++impl_->from_cache;
      return 0;
    }
  }
  std::vector<cublasLtMatmulHeuristicResult_t> proposals;
  if (const int rc = impl_->candidates(m, max_candidates, proposals, Impl::split_k_search(m)))
    return rc;
  std::vector<Choice> found;  // the heuristic's first stays first
  for (const auto& r : proposals) found.push_back(Choice{m, r.algo, r.workspaceSize});
  for (const int splits : impl_->own_splits_for(m)) found.push_back(Choice{m, {}, 0, splits});

  // Graph replays of kRuns calls each, in rounds that alternate between the
  // candidates (form_timing.hpp); a proposal that fails to run is left out.
  constexpr int kRounds = 4, kRuns = 5;
  const size_t count = found.size();
  FormTimes times;
  if (const int rc = time_forms(
          count,
          [&](size_t i) {
            if (found[i].workspace > workspace_bytes)
              return static_cast<int>(cudaErrorInvalidValue);
            return impl_->matmul(handle, found[i], A, W, bias, residual, C, m, workspace,
                                 workspace_bytes, stream);
          },
          stream, kRuns, kRounds, times))
    return rc;
  const int best = detail::fastest_keeping_first(times.best_ms);
  ENCODER_KIT_REQUIRE(best >= 0);  // every proposal failed
  const Choice pick = found[static_cast<size_t>(best)];
  impl_->remember(pick);
  ++impl_->timed;
  // A stale entry that failed the check above is overwritten here.
  if (impl_->tuning)
    impl_->tuning->put(impl_->problem_key(m, workspace_bytes), encode_choice(pick));
  return 0;
}

}  // namespace encoder_kit::cuda
