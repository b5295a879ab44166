// The FP8 path's kernels against float64: per-row quantisation (plain and
// with a folded RMSNorm), SiLU-mul quantisation of a blocked [gate | up]
// product, the exact GELU's quantisation, Fp8GemmPlan's scaled products (bias, GELU, several m,
// tuning), and the whole linear in a CUDA graph replayed on new rows, whose scales must be the new
// rows'. Outputs are poisoned first: rows past m stay NaN.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/fp8.hpp>
#include <encoder_kit/fp8.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

// Without FP8 tensor cores (compute capability below 8.9) the products are
// refused at planning, which is what such a GPU can check.
bool skip_without_fp8() {
  if (k::fp8_supported()) return false;
  k::Fp8GemmPlan plan;
  CHECK(plan.initialize(64, 96, 64, k::GemmPlan::Epilogue::None) != 0);
  MESSAGE("no FP8 tensor cores: only the refusal was checked");
  return true;
}

double dec(uint8_t code) {
  return encoder_kit::e4m3_to_f32(code);
}

// Each code of a quantised row within half an e4m3 step of x / scale.
void check_codes(const std::vector<uint8_t>& q, const std::vector<double>& x, double scale,
                 int64_t r, int64_t cols) {
  size_t outside = 0;
  for (int64_t c = 0; c < cols; ++c) {
    const double ref = x[static_cast<size_t>(c)] / scale;
    const double got = dec(q[static_cast<size_t>(r * cols + c)]);
    if (std::fabs(got - ref) > std::fabs(ref) * 0.0625 * 1.001 + std::pow(2.0, -10)) ++outside;
  }
  CHECK(outside == 0);
}

// Row r of an activation's codes q and scales s against its values `act`
// (float64, as the bf16 module rounds them): the scale within 1% of max |act|
// / 448, each decoded code within an e4m3 step of its value plus one bf16
// step (the device's exp or erf may round to the neighbouring bf16).
void check_activation_codes(const std::vector<uint8_t>& q, const std::vector<float>& s,
                            const std::vector<double>& act, int64_t r) {
  const int64_t cols = static_cast<int64_t>(act.size());
  double amax = 0.0;
  for (double v : act) amax = std::max(amax, std::fabs(v));
  const double scale = amax / 448.0;
  CHECK(s[static_cast<size_t>(r)] == doctest::Approx(scale).epsilon(1e-2));
  size_t outside = 0;
  for (int64_t c = 0; c < cols; ++c) {
    const double ref = act[static_cast<size_t>(c)];
    const double got = dec(q[static_cast<size_t>(r * cols + c)]) * s[static_cast<size_t>(r)];
    if (std::fabs(got - ref) > std::fabs(ref) * (0.0625 + 0.01) + scale * std::pow(2.0, -9))
      ++outside;
  }
  CHECK(outside == 0);
}

}  // namespace

GPU_TEST_CASE("fp8: per-row quantisation, plain and with a folded RMSNorm; NaN rows show") {
  require_gpu();
  // Qwen2.5-VL's and SigLIP's widths, SigLIP's MLP (held in registers over
  // one, two and three laps of the block), and a row past kHeldRowCols (two
  // passes, five laps).
  const int64_t rows = 67;
  static_assert(k::detail::kHeldRowCols < 8208);
  for (const auto& [cols, eps] : {std::pair<int64_t, float>{1280, -1.0f},
                                  {1280, 1e-6f},
                                  {1152, 1e-6f},
                                  {2064, -1.0f},
                                  {4304, 1e-6f},
                                  {8192, -1.0f},
                                  {8208, -1.0f},
                                  {8208, 1e-6f}}) {
    const int64_t ld = cols + 16;
    CAPTURE(cols);
    CAPTURE(eps);
    std::vector<bf16> x(static_cast<size_t>(rows * ld));
    for (int64_t r = 0; r < rows; ++r) {  // rows of different magnitudes, one zero row
      const auto v = random_bf16(static_cast<size_t>(ld), std::pow(4.0f, float(r % 9) - 4.0f));
      std::copy(v.begin(), v.end(), x.begin() + r * ld);
    }
    std::fill(x.begin() + 3 * ld, x.begin() + 4 * ld, to_bf(0.0f));
    x[static_cast<size_t>(7 * ld + 11)] = to_bf(NAN);
    DeviceBuffer<bf16> dx(x.size());
    DeviceBuffer<uint8_t> dq(static_cast<size_t>(rows * cols));
    DeviceBuffer<float> ds(static_cast<size_t>(rows + 8));
    dx.upload(x);
    dq.poison();
    ds.poison();
    CHECK_OK(k::quantize_rows_e4m3(dx.get(), ld, dq.get(), ds.get(), rows - 1, cols, eps, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto q = dq.download();
    const auto s = ds.download();
    for (int64_t r = 0; r < rows - 1; ++r) {
      CAPTURE(r);
      std::vector<double> row(static_cast<size_t>(cols));
      double amax = 0.0, sumsq = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        row[static_cast<size_t>(c)] = to_f(x[static_cast<size_t>(r * ld + c)]);
        amax = std::max(amax, std::fabs(row[static_cast<size_t>(c)]));
        sumsq += row[static_cast<size_t>(c)] * row[static_cast<size_t>(c)];
      }
      if (r == 7) {  // the NaN row: a NaN scale, never a finite product
        CHECK(std::isnan(s[7]));
        continue;
      }
      const double scale = amax > 0 ? amax / 448.0 : 1.0;
      const double norm = eps >= 0 ? 1.0 / std::sqrt(sumsq / cols + eps) : 1.0;
      CHECK(s[static_cast<size_t>(r)] == doctest::Approx(scale * norm).epsilon(1e-5));
      check_codes(q, row, scale, r, cols);
    }
    CHECK(std::isnan(s[static_cast<size_t>(rows - 1)]));  // past the rows: untouched
    size_t written_past = 0;
    for (int64_t i = (rows - 1) * cols; i < rows * cols; ++i)
      written_past += q[static_cast<size_t>(i)] != 0xff;
    CHECK(written_past == 0);
  }
}

// LayerNorm inside the quantisation: the codes of the centred row, the scale
// times rstd, at widths held over one to four laps; a constant row (zero
// variance: zero codes, scale rsqrt(eps)) and a NaN row show.
GPU_TEST_CASE("fp8: centred per-row quantisation carries a LayerNorm's rstd") {
  require_gpu();
  const int64_t rows = 41;
  const float eps = 1e-6f;
  for (const int64_t cols : {int64_t{1152}, int64_t{2064}, int64_t{4304}, int64_t{8192}}) {
    CAPTURE(cols);
    const int64_t ld = cols + 8;
    std::vector<bf16> x(static_cast<size_t>(rows * ld));
    for (int64_t r = 0; r < rows; ++r) {  // off-centre rows of different magnitudes
      const float mag = std::pow(4.0f, float(r % 7) - 3.0f);
      const auto v = random_bf16(static_cast<size_t>(ld), mag);
      for (int64_t c = 0; c < ld; ++c)
        x[static_cast<size_t>(r * ld + c)] = to_bf(to_f(v[static_cast<size_t>(c)]) + 3.0f * mag);
    }
    x[static_cast<size_t>(5 * ld + 2)] = to_bf(NAN);
    std::fill(x.begin() + 9 * ld, x.begin() + 10 * ld, to_bf(2.5f));  // a constant row
    DeviceBuffer<bf16> dx(x.size());
    DeviceBuffer<uint8_t> dq(static_cast<size_t>(rows * cols));
    DeviceBuffer<float> ds(static_cast<size_t>(rows));
    dx.upload(x);
    dq.poison();
    ds.poison();
    CHECK_OK(k::quantize_centred_rows_e4m3(dx.get(), ld, dq.get(), ds.get(), rows - 1, cols, eps,
                                           nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto q = dq.download();
    const auto s = ds.download();
    for (int64_t r = 0; r < rows - 1; ++r) {
      CAPTURE(r);
      if (r == 5) {
        CHECK(std::isnan(s[5]));
        continue;
      }
      if (r == 9) {  // zero codes: the product is the folded bias alone
        CHECK(s[9] == doctest::Approx(1.0 / std::sqrt(double(eps))).epsilon(1e-4));
        size_t nonzero = 0;
        for (int64_t c = 0; c < cols; ++c)
          nonzero += (q[static_cast<size_t>(9 * cols + c)] & 0x7f) != 0;
        CHECK(nonzero == 0);
        continue;
      }
      double mean = 0.0, var = 0.0, amax = 0.0;
      for (int64_t c = 0; c < cols; ++c) mean += to_f(x[static_cast<size_t>(r * ld + c)]);
      mean /= static_cast<double>(cols);
      std::vector<double> centred(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) {
        const double v = to_f(x[static_cast<size_t>(r * ld + c)]) - mean;
        centred[static_cast<size_t>(c)] = v;
        var += v * v;
        amax = std::max(amax, std::fabs(v));
      }
      var /= static_cast<double>(cols);
      const double scale = amax / 448.0;
      CHECK(s[static_cast<size_t>(r)] ==
            doctest::Approx(scale / std::sqrt(var + eps)).epsilon(1e-4));
      // The device's centring rounds in float: a little more than half a step.
      size_t outside = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double ref = centred[static_cast<size_t>(c)] / scale;
        const double got = dec(q[static_cast<size_t>(r * cols + c)]);
        if (std::fabs(got - ref) > std::fabs(ref) * 0.0625 * 1.01 + std::pow(2.0, -9)) ++outside;
      }
      CHECK(outside == 0);
    }
    CHECK(std::isnan(s[static_cast<size_t>(rows - 1)]));  // past the rows: untouched
    size_t written_past = 0;
    for (int64_t i = (rows - 1) * cols; i < rows * cols; ++i)
      written_past += q[static_cast<size_t>(i)] != 0xff;
    CHECK(written_past == 0);
  }
  // Rows longer than the held form's are refused.
  CHECK(k::quantize_centred_rows_e4m3(nullptr, 8208, nullptr, nullptr, 1, 8208, eps, nullptr) != 0);
}

namespace {
void silu_mul_case(int64_t inter) {
  const int64_t rows = 45;
  const auto gu = random_bf16(static_cast<size_t>(rows * 2 * inter), 2.0f);
  DeviceBuffer<bf16> dgu(gu.size());
  DeviceBuffer<uint8_t> dq(static_cast<size_t>(rows * inter));
  DeviceBuffer<float> ds(static_cast<size_t>(rows));
  dgu.upload(gu);
  dq.poison();
  ds.poison();
  CHECK_OK(k::silu_mul_quantize_e4m3(dgu.get(), dq.get(), ds.get(), rows, inter, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto q = dq.download();
  const auto s = ds.download();
  const int64_t blk = k::kGateUpBlock;
  for (int64_t r = 0; r < rows; ++r) {
    CAPTURE(r);
    std::vector<double> act(static_cast<size_t>(inter));
    for (int64_t f = 0; f < inter; ++f) {
      const int64_t col = (f / blk) * 2 * blk + f % blk;
      const double g = to_f(gu[static_cast<size_t>(r * 2 * inter + col)]);
      const double u = to_f(gu[static_cast<size_t>(r * 2 * inter + col + blk)]);
      act[static_cast<size_t>(f)] = round_bf(round_bf(g / (1.0 + std::exp(-g))) * u);
    }
    check_activation_codes(q, s, act, r);
  }
}
}  // namespace

GPU_TEST_CASE("fp8: SiLU-mul of a blocked [gate | up] product, quantised per row") {
  require_gpu();
  // Held in registers (one lap, Qwen2.5-VL's padded 3456 in two), and two
  // passes past kHeldRowCols.
  for (const int64_t inter : {3 * k::kGateUpBlock, 27 * k::kGateUpBlock, 66 * k::kGateUpBlock}) {
    CAPTURE(inter);
    silu_mul_case(inter);
  }
}

// The exact GELU inside the quantisation (InternViT's fc1 output in FP8):
// one to four laps, a row past the last written left poisoned, a NaN row NaN.
GPU_TEST_CASE("fp8: the exact GELU of each row, quantised per row") {
  require_gpu();
  for (const int64_t cols : {int64_t{64}, int64_t{1040}, int64_t{4096}, k::detail::kHeldRowCols}) {
    CAPTURE(cols);
    const int64_t rows = 37;
    auto x = random_bf16(static_cast<size_t>(rows * cols), 3.0f);
    x[static_cast<size_t>(5 * cols + 7)] = to_bf(NAN);
    DeviceBuffer<bf16> dx(x.size());
    DeviceBuffer<uint8_t> dq(static_cast<size_t>(rows * cols));
    DeviceBuffer<float> ds(static_cast<size_t>(rows));
    dx.upload(x);
    dq.poison();
    ds.poison();
    CHECK_OK(k::gelu_quantize_rows_e4m3(dx.get(), dq.get(), ds.get(), rows - 1, cols, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto q = dq.download();
    const auto s = ds.download();
    CHECK(std::isnan(s[5]));
    CHECK(std::isnan(s[static_cast<size_t>(rows - 1)]));  // not written: still poisoned
    for (int64_t r = 0; r < rows - 1; ++r) {
      if (r == 5) continue;
      CAPTURE(r);
      std::vector<double> act(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) {
        const double v = to_f(x[static_cast<size_t>(r * cols + c)]);
        act[static_cast<size_t>(c)] = round_bf(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
      }
      check_activation_codes(q, s, act, r);
    }
  }
  // Past the held width: refused (the FP8 block refuses such an MLP at start-up).
  CHECK(k::gelu_quantize_rows_e4m3(nullptr, nullptr, nullptr, 1, 8208, nullptr) != 0);
}

namespace {

using Ep = k::GemmPlan::Epilogue;

struct Fp8Case {
  int64_t m_max, n, k;
  Ep ep;
};

// Random codes (any finite e4m3, both signs) and positive scales.
std::vector<uint8_t> random_codes(size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& c : v) {
    c = static_cast<uint8_t>(rng()() & 0xff);
    if ((c & 0x7f) == 0x7f) c = static_cast<uint8_t>(c & 0xfe);  // no NaN codes
  }
  return v;
}
std::vector<float> random_scales(size_t n, float base) {
  std::uniform_real_distribution<float> d(0.5f, 2.0f);
  std::vector<float> v(n);
  for (auto& s : v) s = base * d(rng());
  return v;
}

void check_product(const Fp8Case& fc, const std::vector<int64_t>& ms, bool tune) {
  LtHandle lt;
  k::Fp8GemmPlan plan;
  CHECK_OK(plan.initialize(fc.m_max, fc.n, fc.k, fc.ep));
  DeviceBuffer<unsigned char> ws(k::GemmPlan::workspace_bytes());
  for (const int64_t m : ms) {
    CAPTURE(m);
    const auto A = random_codes(static_cast<size_t>(m * fc.k));
    const auto W = random_codes(static_cast<size_t>(fc.n * fc.k));
    // Codes reach 448: scales keep the products O(1).
    const float base = 1.0f / (100.0f * std::sqrt(static_cast<float>(fc.k)));
    const auto sa = random_scales(static_cast<size_t>(m), base);
    const auto sw = random_scales(static_cast<size_t>(fc.n), 1.0f / 100.0f);
    const auto bias = random_bf16(static_cast<size_t>(fc.n), 0.5f);
    DeviceBuffer<uint8_t> dA(A.size()), dW(W.size());
    DeviceBuffer<float> dsa(sa.size()), dsw(sw.size());
    DeviceBuffer<bf16> dbias(bias.size()), dC(static_cast<size_t>(fc.m_max * fc.n));
    dA.upload(A);
    dW.upload(W);
    dsa.upload(sa);
    dsw.upload(sw);
    dbias.upload(bias);
    auto reset = [&] { dC.poison(); };
    const bool with_bias = fc.ep != Ep::None;
    const bf16* b = with_bias ? dbias.get() : nullptr;
    if (tune) {
      reset();
      CHECK_OK(plan.tune(lt.h, dA.get(), dsa.get(), dW.get(), dsw.get(), b, dC.get(), m, ws.get(),
                         ws.size(), nullptr));
    }
    reset();
    CHECK_OK(plan.run(lt.h, dA.get(), dsa.get(), dW.get(), dsw.get(), b, dC.get(), m, ws.get(),
                      ws.size(), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> ref(static_cast<size_t>(m * fc.n)), mag(ref.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < fc.n; ++j) {
        double acc = 0.0, size = 0.0;
        for (int64_t p = 0; p < fc.k; ++p) {
          const double t =
              dec(A[static_cast<size_t>(i * fc.k + p)]) * dec(W[static_cast<size_t>(j * fc.k + p)]);
          acc += t;
          size += std::fabs(t);
        }
        const double scale = double(sa[static_cast<size_t>(i)]) * sw[static_cast<size_t>(j)];
        double v = acc * scale, vm = size * scale;
        if (with_bias) v += to_f(bias[static_cast<size_t>(j)]);
        if (fc.ep == Ep::BiasGeluTanh)
          v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        ref[static_cast<size_t>(i * fc.n + j)] = v;
        mag[static_cast<size_t>(i * fc.n + j)] = std::fabs(v) + 3e-2 * vm;
      }
    const auto got = dC.download();
    // Hopper's FP8 tensor cores keep about 14 bits of the running sum before
    // cuBLASLt adds it into fp32 (DeepSeek-V3 report, 3.3.2): where the terms
    // cancel, the error follows 2^-13 of their size, which the bound above
    // (3e-4 of it, through rtol) allows; on an H100, 5 to 233 of 7,000-49,000
    // values of cancelling sums exceeded 1e-5 of it.
    // cuBLASLt's GELU epilogue in its FP8 products is not exactly the tanh
    // formula: on an H100, 112 of 73,168 values were off by up to 0.031 (the
    // output's RMS is about 1.3 here) at a relative L2 error of 1.7e-3. The
    // bound is then absolute, from the output's size, and L2 stays 1e-2.
    const bool gelu = fc.ep == Ep::BiasGeluTanh;
    CHECK_CLOSE(compare(
                    got, ref, gelu ? 1.5e-2 : 1e-2, gelu ? 3e-2 * rms(ref) : 1e-4,
                    [&](size_t i) { return i < ref.size(); }, &mag),
                1e-2);
    size_t past_m = 0;
    for (size_t i = ref.size(); i < got.size(); ++i) past_m += std::isnan(to_f(got[i])) ? 0 : 1;
    CHECK(past_m == 0);
  }
}

}  // namespace

GPU_TEST_CASE("fp8: Fp8GemmPlan against float64 (plain, bias, GELU, tuned)") {
  require_gpu();
  if (skip_without_fp8()) return;
  check_product({256, 96, 64, Ep::None}, {256, 77, 1}, false);
  check_product({128, 384, 1280, Ep::Bias}, {128, 33}, false);
  // The shapes whose residual forms came out wrong (fp8.hpp), without it.
  check_product({128, 1280, 512, Ep::Bias}, {128, 9}, false);
  check_product({512, 256, 256, Ep::Bias}, {512, 300}, true);
  check_product({256, 4304, 1152, Ep::BiasGeluTanh}, {256, 17}, false);  // Qwen3-VL's fc1
}

GPU_TEST_CASE("fp8: Fp8GemmPlan refuses what it cannot run") {
  require_gpu();
  if (skip_without_fp8()) return;
  k::Fp8GemmPlan plan;
  CHECK(plan.initialize(64, 100, 64, Ep::None) != 0);     // n not a multiple of 16
  CHECK(plan.initialize(64, 96, 72, Ep::None) != 0);      // k not a multiple of 16
  CHECK(plan.initialize(64, 96, 64, Ep::BiasGelu) != 0);  // no erf GELU in FP8
  CHECK_OK(plan.initialize(64, 96, 64, Ep::Bias));
  LtHandle lt;
  DeviceBuffer<uint8_t> a(64 * 64), w(96 * 64);
  DeviceBuffer<float> sa(64), sw(96);
  DeviceBuffer<bf16> c(64 * 96);
  DeviceBuffer<unsigned char> ws(k::GemmPlan::workspace_bytes());
  // The plan has a bias: none given is refused, as is m past m_max.
  CHECK(plan.run(lt.h, a.get(), sa.get(), w.get(), sw.get(), nullptr, c.get(), 64, ws.get(),
                 ws.size(), nullptr) != 0);
  CHECK(plan.run(lt.h, a.get(), sa.get(), w.get(), sw.get(), c.get(), c.get(), 65, ws.get(),
                 ws.size(), nullptr) != 0);
}

GPU_TEST_CASE("fp8: a Linear in a CUDA graph, replayed on new rows, against the bf16 linear") {
  require_gpu();
  if (skip_without_fp8()) return;
  const int64_t m = 200, n = 384, kk = 640;
  LtHandle lt;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The weight as a checkpoint gives it (float), quantised per output channel.
  std::vector<float> wf(static_cast<size_t>(n * kk));
  const auto wb = random_bf16(wf.size(), 1.0f / std::sqrt(float(kk)));
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = to_f(wb[i]);
  const encoder_kit::E4m3Rows wq = encoder_kit::quantize_rows_e4m3(wf.data(), n, kk);
  const auto bias = random_bf16(static_cast<size_t>(n), 0.2f);
  DeviceBuffer<uint8_t> dW(wq.codes.size()), dxq(static_cast<size_t>(m * kk));
  DeviceBuffer<float> dsw(wq.scales.size()), dsx(static_cast<size_t>(m));
  DeviceBuffer<bf16> dx(static_cast<size_t>(m * kk)), dbias(bias.size()),
      dy(static_cast<size_t>(m * n));
  DeviceBuffer<unsigned char> ws(k::GemmPlan::workspace_bytes());
  dW.upload(wq.codes);
  dsw.upload(wq.scales);
  dbias.upload(bias);
  k::Fp8GemmPlan plan;
  CHECK_OK(plan.initialize(m, n, kk, Ep::Bias));
  CHECK_OK(plan.tune(lt.h, dxq.get(), dsx.get(), dW.get(), dsw.get(), dbias.get(), dy.get(), m,
                     ws.get(), ws.size(), s));
  auto linear = [&] {
    CHECK_OK(k::quantize_rows_e4m3(dx.get(), kk, dxq.get(), dsx.get(), m, kk, -1.0f, s));
    CHECK_OK(plan.run(lt.h, dxq.get(), dsx.get(), dW.get(), dsw.get(), dbias.get(), dy.get(), m,
                      ws.get(), ws.size(), s));
  };
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  linear();
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  // Rows of a new magnitude each replay: the scales are computed in the graph.
  for (const float magnitude : {1.0f, 300.0f, 1e-3f}) {
    CAPTURE(magnitude);
    const auto x = random_bf16(static_cast<size_t>(m * kk), magnitude);
    dx.upload(x);
    dy.poison();
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    std::vector<double> ref(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = to_f(bias[static_cast<size_t>(j)]);
        for (int64_t p = 0; p < kk; ++p)
          acc += double(to_f(x[static_cast<size_t>(i * kk + p)])) *
                 wf[static_cast<size_t>(j * kk + p)];
        ref[static_cast<size_t>(i * n + j)] = acc;
      }
    // Two e4m3 operands: a few percent of the output's size, element-wise
    // bounded against the output's RMS (a sum's error follows its terms).
    const Comparison c = compare(dy.download(), ref, 0.0, 0.25 * rms(ref));
    INFO("rel L2 " << c.rel_l2 << ", max err " << c.max_err << ", NaN " << c.nan);
    CHECK(c.nan == 0);
    CHECK(c.outside == 0);
    CHECK(c.rel_l2 < 0.05);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}
