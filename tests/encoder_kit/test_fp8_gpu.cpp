// The FP8 path on the GPU (encoder_kit/cuda/fp8_gemm.hpp): the quantise
// kernel bit for bit against the host quantiser, and Fp8GemmPlan against the
// float64 product of the dequantised operands (tight: only fp32 accumulation
// and the bf16 output rounding differ) and against the float64 product of the
// bf16 operands (loose: the quantisation error), for every epilogue, fused by
// cuBLASLt and as the separate pass, m = 1, odd m, m not a multiple of 16,
// rows past m left untouched, after tune(), and replayed from a CUDA graph.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/fp8_gemm.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;
using Ep = k::Fp8GemmPlan::Epilogue;

namespace {

struct LtHandle {
  cublasLtHandle_t h = nullptr;
  LtHandle() { REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~LtHandle() { cublasLtDestroy(h); }
};

// The host quantiser over bf16 rows: codes and per-row scales.
struct Quantised {
  std::vector<uint8_t> q;
  std::vector<float> s;
};
Quantised quantise(const std::vector<bf16>& x, int64_t rows, int64_t cols) {
  Quantised out{std::vector<uint8_t>(static_cast<size_t>(rows * cols)),
                std::vector<float>(static_cast<size_t>(rows))};
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[c] = to_f(x[r * cols + c]);
    out.s[r] = k::quantize_row_e4m3(row.data(), cols, &out.q[r * cols]);
  }
  return out;
}

std::vector<double> dequantise(const Quantised& x, int64_t rows, int64_t cols) {
  std::vector<double> d(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      d[r * cols + c] = static_cast<double>(x.s[r]) * k::e4m3_to_float(x.q[r * cols + c]);
  return d;
}

double act(double v, Ep ep) {
  if (ep == Ep::BiasGelu) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  if (ep == Ep::BiasGeluTanh)
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  return v;
}

// C = act(a w^T + bias) + residual in float64; magnitude: the sum of the
// terms' sizes, which the rounding errors follow.
void reference(const std::vector<double>& a, const std::vector<double>& w,
               const std::vector<bf16>* bias, const std::vector<bf16>* residual, int64_t m,
               int64_t n, int64_t kk, Ep ep, std::vector<double>& out,
               std::vector<double>& magnitude) {
  out.assign(static_cast<size_t>(m * n), 0.0);
  magnitude.assign(out.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < kk; ++p) {
        acc += a[i * kk + p] * w[j * kk + p];
        mag += std::fabs(a[i * kk + p] * w[j * kk + p]);
      }
      if (bias != nullptr) {
        acc += to_f((*bias)[j]);
        mag += std::fabs(to_f((*bias)[j]));
      }
      acc = act(acc, ep);
      if (residual != nullptr) {
        acc += to_f((*residual)[i * n + j]);
        mag += std::fabs(to_f((*residual)[i * n + j]));
      }
      out[i * n + j] = acc;
      magnitude[i * n + j] = mag;
    }
}

struct Fp8Case {
  int64_t m_max, n, k;
  Ep ep;
  bool residual, in_place, fuse;
};

void check_case(const Fp8Case& fc, const std::vector<int64_t>& ms, bool tune) {
  CAPTURE(static_cast<int>(fc.ep));
  CAPTURE(fc.residual);
  CAPTURE(fc.in_place);
  CAPTURE(fc.fuse);
  LtHandle lt;
  k::Fp8GemmPlan plan;
  CHECK_OK(plan.initialize(fc.m_max, fc.n, fc.k, fc.ep, fc.residual, fc.fuse));
  if (!fc.fuse) CHECK(!plan.epilogue_fused());
  MESSAGE("Fp8GemmPlan n=" << fc.n << " k=" << fc.k << " epilogue " << static_cast<int>(fc.ep)
                           << (fc.residual ? " +residual" : "") << ": epilogue "
                           << (plan.epilogue_fused() ? "fused in cuBLASLt" : "separate pass"));
  DeviceBuffer<unsigned char> ws(k::Fp8GemmPlan::workspace_bytes());
  for (const int64_t m : ms) {
    CAPTURE(m);
    const float s = 1.0f / std::sqrt(std::sqrt(static_cast<float>(fc.k)));
    const auto A = random_bf16(static_cast<size_t>(m * fc.k), s);
    const auto W = random_bf16(static_cast<size_t>(fc.n * fc.k), s);
    const auto bias = random_bf16(static_cast<size_t>(fc.n), 0.5f);
    const auto res = random_bf16(static_cast<size_t>(m * fc.n));
    const bool with_bias = fc.ep != Ep::None;
    const Quantised qw = quantise(W, fc.n, fc.k);
    DeviceBuffer<bf16> dA(A.size()), dbias(bias.size()), dres(res.size()),
        dC(static_cast<size_t>(fc.m_max * fc.n));
    DeviceBuffer<uint8_t> dAq(static_cast<size_t>(m * fc.k)), dWq(qw.q.size());
    DeviceBuffer<float> dAs(static_cast<size_t>(m)), dWs(qw.s.size());
    dA.upload(A);
    dWq.upload(qw.q);
    dWs.upload(qw.s);
    dbias.upload(bias);
    dres.upload(res);
    CHECK_OK(k::quantize_rows_e4m3(dA.get(), dAq.get(), dAs.get(), m, fc.k, nullptr));
    auto reset_c = [&] {
      dC.poison();
      if (fc.in_place) dC.upload(res);
    };
    reset_c();
    const bf16* residual = fc.residual ? (fc.in_place ? dC.get() : dres.get()) : nullptr;
    const bf16* b = with_bias ? dbias.get() : nullptr;
    if (tune) {
      CHECK_OK(plan.tune(lt.h, dAq.get(), dAs.get(), dWq.get(), dWs.get(), b, residual, dC.get(), m,
                         ws.get(), ws.size(), nullptr));
      reset_c();
    }
    CHECK_OK(plan.run(lt.h, dAq.get(), dAs.get(), dWq.get(), dWs.get(), b, residual, dC.get(), m,
                      ws.get(), ws.size(), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got = dC.download();
    // Against the dequantised operands: the product is exact up to fp32
    // accumulation and one bf16 rounding (two with the separate pass).
    const Quantised qa = quantise(A, m, fc.k);
    std::vector<double> ref, mag;
    reference(dequantise(qa, m, fc.k), dequantise(qw, fc.n, fc.k), with_bias ? &bias : nullptr,
              fc.residual ? &res : nullptr, m, fc.n, fc.k, fc.ep, ref, mag);
    {
      INFO("against the float64 product of the dequantised operands");
      CHECK_CLOSE(compare(
                      got, ref, 1e-2, 1e-6, [](size_t) { return true; }, &mag),
                  8e-3);
    }
    // Against the bf16 operands: e4m3's three mantissa bits, a few percent.
    reference(to_double(A), to_double(W), with_bias ? &bias : nullptr, fc.residual ? &res : nullptr,
              m, fc.n, fc.k, fc.ep, ref, mag);
    {
      INFO("against the float64 product of the bf16 operands");
      CHECK_CLOSE(compare(
                      got, ref, 0.25, 1e-6, [](size_t) { return true; }, &mag),
                  0.08);
    }
    size_t past_m = 0;
    for (size_t i = static_cast<size_t>(m * fc.n); i < got.size(); ++i)
      past_m += std::isnan(to_f(got[i])) ? 0 : 1;
    CHECK(past_m == 0);
  }
}

}  // namespace

GPU_TEST_CASE("quantize_rows_e4m3 matches the host quantiser bit for bit") {
  require_gpu();
  for (const int64_t cols : {16, 1000, 1280, 3456}) {
    for (const int64_t rows : {1, 7, 33}) {
      CAPTURE(cols);
      CAPTURE(rows);
      // Rows of very different sizes, a zero row, and values down in e4m3's
      // subnormals after scaling (a few large entries beside many small ones).
      std::vector<bf16> x = random_bf16(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r) {
        const float row_scale = std::ldexp(1.0f, static_cast<int>(r % 11) * 3 - 15);
        for (int64_t c = 0; c < cols; ++c) {
          float v = to_f(x[r * cols + c]) * row_scale;
          if (r % 5 == 3) v = 0.0f;
          if (r % 5 == 4 && c % 97 != 0) v *= 1e-4f;
          x[r * cols + c] = to_bf(v);
        }
      }
      const Quantised want = quantise(x, rows, cols);
      DeviceBuffer<bf16> dx(x.size());
      DeviceBuffer<uint8_t> dq(static_cast<size_t>((rows + 1) * cols));
      DeviceBuffer<float> ds(static_cast<size_t>(rows + 1));
      dx.upload(x);
      dq.poison();
      ds.poison();
      CHECK_OK(k::quantize_rows_e4m3(dx.get(), dq.get(), ds.get(), rows, cols, nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      const auto q = dq.download();
      const auto s = ds.download();
      size_t code_diff = 0, scale_diff = 0, touched = 0;
      for (size_t i = 0; i < want.q.size(); ++i) code_diff += q[i] != want.q[i] ? 1 : 0;
      for (size_t r = 0; r < want.s.size(); ++r)
        scale_diff += std::memcmp(&s[r], &want.s[r], 4) != 0 ? 1 : 0;
      for (size_t i = want.q.size(); i < q.size(); ++i) touched += q[i] != 0xff ? 1 : 0;
      CHECK(code_diff == 0);
      CHECK(scale_diff == 0);
      CHECK(touched == 0);
      CHECK(std::isnan(s[static_cast<size_t>(rows)]));
    }
  }
}

GPU_TEST_CASE("Fp8GemmPlan: plain product, m = 1, odd m, m not a multiple of 16") {
  require_gpu();
  check_case({128, 96, 64, Ep::None, false, false, true}, {128, 1, 7, 33, 100}, false);
}

GPU_TEST_CASE("Fp8GemmPlan: bias at Qwen widths (k = 1280, a 384-row slice of qkv)") {
  require_gpu();
  check_case({256, 384, 1280, Ep::Bias, false, false, true}, {256, 77, 1}, false);
  check_case({256, 384, 1280, Ep::Bias, false, false, false}, {77}, false);
}

GPU_TEST_CASE("Fp8GemmPlan: bias + residual, separate and in place (proj, down)") {
  require_gpu();
  for (const bool fuse : {true, false}) {
    check_case({64, 1280, 3456, Ep::Bias, true, false, fuse}, {64, 13}, false);
    check_case({64, 256, 1280, Ep::Bias, true, true, fuse}, {64, 9}, false);
  }
}

GPU_TEST_CASE("Fp8GemmPlan: GELU epilogues, fused and as the separate pass") {
  require_gpu();
  for (const bool fuse : {true, false}) {
    check_case({96, 512, 256, Ep::BiasGelu, false, false, fuse}, {96, 31}, false);
    check_case({96, 512, 256, Ep::BiasGeluTanh, false, false, fuse}, {96, 31}, false);
  }
}

GPU_TEST_CASE("Fp8GemmPlan::tune keeps a correct algorithm") {
  require_gpu();
  check_case({512, 640, 1280, Ep::Bias, true, false, true}, {512, 300}, true);
}

GPU_TEST_CASE("Fp8GemmPlan: quantise and product replayed from a CUDA graph") {
  require_gpu();
  const int64_t m = 45, n = 256, kk = 512;
  LtHandle lt;
  k::Fp8GemmPlan plan;
  CHECK_OK(plan.initialize(m, n, kk, Ep::Bias, true));
  const auto A = random_bf16(static_cast<size_t>(m * kk), 0.2f);
  const auto W = random_bf16(static_cast<size_t>(n * kk), 0.2f);
  const auto bias = random_bf16(static_cast<size_t>(n));
  const auto res = random_bf16(static_cast<size_t>(m * n));
  const Quantised qw = quantise(W, n, kk);
  DeviceBuffer<bf16> dA(A.size()), dbias(bias.size()), dres(res.size()), dC(res.size()),
      dC2(res.size());
  DeviceBuffer<uint8_t> dAq(A.size()), dWq(qw.q.size());
  DeviceBuffer<float> dAs(static_cast<size_t>(m)), dWs(qw.s.size());
  DeviceBuffer<unsigned char> ws(k::Fp8GemmPlan::workspace_bytes());
  dA.upload(A);
  dWq.upload(qw.q);
  dWs.upload(qw.s);
  dbias.upload(bias);
  dres.upload(res);
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto forward = [&](bf16* out) {
    CHECK_OK(k::quantize_rows_e4m3(dA.get(), dAq.get(), dAs.get(), m, kk, s));
    CHECK_OK(plan.run(lt.h, dAq.get(), dAs.get(), dWq.get(), dWs.get(), dbias.get(), dres.get(),
                      out, m, ws.get(), ws.size(), s));
  };
  forward(dC.get());  // eager
  dC2.poison();
  dAq.poison();
  dAs.poison();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  forward(dC2.get());
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  const auto eager = dC.download(), replay = dC2.download();
  size_t differ = 0;
  for (size_t i = 0; i < eager.size(); ++i)
    differ += std::memcmp(&eager[i], &replay[i], sizeof(bf16)) != 0 ? 1 : 0;
  CHECK(differ == 0);  // the same algorithm on the same inputs
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

GPU_TEST_CASE("Fp8GemmPlan and quantize_rows_e4m3 reject bad arguments") {
  require_gpu();
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  k::Fp8GemmPlan plan;
  CHECK(plan.initialize(16, 64, 40, Ep::None, false) == bad);  // k not a multiple of 16
  CHECK(plan.initialize(16, 60, 64, Ep::None, false) == bad);  // n not a multiple of 8
  CHECK(plan.initialize(16, 64, 64, Ep::BiasGelu, true) == bad);
  CHECK_OK(plan.initialize(16, 64, 64, Ep::Bias, false));
  LtHandle lt;
  DeviceBuffer<uint8_t> q(16 * 64), wq(64 * 64);
  DeviceBuffer<float> sa(16), sw(64);
  DeviceBuffer<bf16> c(16 * 64), b(64);
  DeviceBuffer<unsigned char> ws(k::Fp8GemmPlan::workspace_bytes());
  // Missing bias, an unexpected residual, m past m_max, a missing scale.
  CHECK(plan.run(lt.h, q.get(), sa.get(), wq.get(), sw.get(), nullptr, nullptr, c.get(), 16,
                 ws.get(), ws.size(), nullptr) == bad);
  CHECK(plan.run(lt.h, q.get(), sa.get(), wq.get(), sw.get(), b.get(), c.get(), c.get(), 16,
                 ws.get(), ws.size(), nullptr) == bad);
  CHECK(plan.run(lt.h, q.get(), sa.get(), wq.get(), sw.get(), b.get(), nullptr, c.get(), 17,
                 ws.get(), ws.size(), nullptr) == bad);
  CHECK(plan.run(lt.h, q.get(), nullptr, wq.get(), sw.get(), b.get(), nullptr, c.get(), 16,
                 ws.get(), ws.size(), nullptr) == bad);
  DeviceBuffer<bf16> x(16 * 64);
  CHECK(k::quantize_rows_e4m3(x.get(), q.get(), nullptr, 16, 64, nullptr) == bad);
  CHECK(k::quantize_rows_e4m3(x.get(), q.get(), sa.get(), 16, 0, nullptr) == bad);
}
