// The one-launch MLP (mlp_sm90.cu) against float64: RMSNorm, gate/up with
// SiLU·mul and down with bias and residual, in place on x. Shapes cover the
// down product's k split 2 to 6 ways (partials added across blocks), one
// split with several items a block, partial tiles on every side, and the 7B
// tower's widths at one image's 256 rows. Also: a second call without
// clearing gives the same bits (the kernel leaves its counters at zero and
// adds partials in a fixed order), a CUDA graph replay gives the eager bits,
// and bad arguments are refused.
#include "gpu_test_util.hpp"

#include <cmath>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

struct Shape {
  int64_t rows, d, inter;
};

// Inputs of one block's MLP, the norm's weight folded into gate/up.
struct MlpCase {
  Shape sh;
  float eps = 1e-6f;
  std::vector<bf16> x, gate, up, gate_b, up_b, down, down_b;

  explicit MlpCase(Shape s) : sh(s) {
    const float wk = 1.0f / std::sqrt(static_cast<float>(sh.d));
    const float wi = 1.0f / std::sqrt(static_cast<float>(sh.inter));
    x = random_bf16(static_cast<size_t>(sh.rows * sh.d));
    // Rows of sizes 1/8 .. 8 (the norm undoes them); row 1 all zeros.
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t i = 0; i < sh.d; ++i) {
        bf16& v = x[r * sh.d + i];
        v = r == 1 ? to_bf(0.0f) : to_bf(to_f(v) * std::ldexp(1.0f, static_cast<int>(r % 7) - 3));
      }
    gate = random_bf16(static_cast<size_t>(sh.inter * sh.d), wk);
    up = random_bf16(static_cast<size_t>(sh.inter * sh.d), wk);
    gate_b = random_bf16(static_cast<size_t>(sh.inter), 0.5f);
    up_b = random_bf16(static_cast<size_t>(sh.inter), 0.5f);
    down = random_bf16(static_cast<size_t>(sh.d * sh.inter), wi);
    down_b = random_bf16(static_cast<size_t>(sh.d), 0.5f);
  }

  // silu(gate) * up of the normalised rows, rounded as the module rounds.
  std::vector<double> act() const {
    const auto wg = to_double(gate), wu = to_double(up), xd = to_double(x);
    std::vector<double> y(static_cast<size_t>(sh.rows * sh.inter));
    std::vector<double> n(static_cast<size_t>(sh.d));
    for (int64_t r = 0; r < sh.rows; ++r) {
      double ss = 0.0;
      for (int64_t i = 0; i < sh.d; ++i) ss += xd[r * sh.d + i] * xd[r * sh.d + i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(sh.d) + eps);
      for (int64_t i = 0; i < sh.d; ++i) n[i] = xd[r * sh.d + i] * scale;
      for (int64_t f = 0; f < sh.inter; ++f) {
        double g = to_f(gate_b[f]), u = to_f(up_b[f]);
        for (int64_t i = 0; i < sh.d; ++i) {
          g += n[i] * wg[f * sh.d + i];
          u += n[i] * wu[f * sh.d + i];
        }
        y[r * sh.inter + f] = silu_mul_ref(g, u);
      }
    }
    return y;
  }

  // x + act W_down^T + b_down, and the sum of the terms' magnitudes (the
  // scale of the output's rounding and of the fp32 sum's error).
  void output(const std::vector<double>& a, std::vector<double>& out,
              std::vector<double>& magnitude) const {
    const auto wd = to_double(down);
    out.assign(x.size(), 0.0);
    magnitude.assign(x.size(), 0.0);
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int64_t j = 0; j < sh.d; ++j) {
        const double base = to_f(x[r * sh.d + j]) + to_f(down_b[j]);
        double s = base, m = std::fabs(to_f(x[r * sh.d + j])) + std::fabs(to_f(down_b[j]));
        for (int64_t f = 0; f < sh.inter; ++f) {
          const double p = a[r * sh.inter + f] * wd[j * sh.inter + f];
          s += p;
          m += std::fabs(p);
        }
        out[r * sh.d + j] = s;
        magnitude[r * sh.d + j] = m;
      }
  }
};

// The weights on the device, gate/up blocked as the kernel reads them.
struct DeviceMlp {
  DeviceBuffer<bf16> gate_up, gate_up_b, down, down_b;
  explicit DeviceMlp(const MlpCase& m)
      : gate_up(static_cast<size_t>(k::gate_up_blocked_rows(m.sh.inter) * m.sh.d)),
        gate_up_b(static_cast<size_t>(k::gate_up_blocked_rows(m.sh.inter))),
        down(m.down.size()),
        down_b(m.down_b.size()) {
    std::vector<bf16> hw(gate_up.size()), hb(gate_up_b.size());
    k::block_gate_up_rows(m.gate.data(), m.up.data(), m.sh.inter, m.sh.d, hw.data());
    k::block_gate_up_rows(m.gate_b.data(), m.up_b.data(), m.sh.inter, 1, hb.data());
    gate_up.upload(hw);
    gate_up_b.upload(hb);
    down.upload(m.down);
    down_b.upload(m.down_b);
  }
};

struct Workspace {
  size_t bytes;
  DeviceBuffer<char> buf;
  explicit Workspace(const Shape& sh)
      : bytes(k::rms_mlp_workspace_bytes(sh.rows, sh.d, sh.inter)), buf(bytes) {}
};

int run_mlp(const MlpCase& m, const DeviceMlp& w, bf16* x, bf16* act, Workspace& ws,
            cudaStream_t s) {
  return k::rms_mlp_bf16(x, w.gate_up.get(), w.gate_up_b.get(), w.down.get(), w.down_b.get(), act,
                         m.sh.rows, m.sh.d, m.sh.inter, m.eps, ws.buf.get(), ws.bytes, s);
}

bool bits_equal(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(to_f(a[i]) == to_f(b[i]))) return false;  // NaN never equal
  return true;
}

}  // namespace

GPU_TEST_CASE("rms_mlp_bf16: a block's MLP in one launch, against float64") {
  require_gpu();
  if (!k::rms_mlp_supported()) {  // not Hopper: refused, never run
    DeviceBuffer<bf16> buf(1 << 12);
    DeviceBuffer<char> ws(1 << 20);
    CHECK(k::rms_mlp_bf16(buf.get(), buf.get(), buf.get(), buf.get(), buf.get(), buf.get(), 4, 64,
                          128, 1e-6f, ws.get(), 1 << 20, nullptr) != 0);
    return;
  }
  // One row (k split 3 ways), partial tiles with a 5-way split, the 7B
  // tower's one image (6 ways), 2 ways over 6 row tiles, and one split with
  // more down tiles than multiprocessors (blocks take several items).
  for (const Shape sh : {Shape{1, 128, 384}, Shape{200, 256, 640}, Shape{256, 1280, 3456},
                         Shape{700, 1280, 384}, Shape{2100, 1280, 128}}) {
    CAPTURE(sh.rows);
    CAPTURE(sh.d);
    CAPTURE(sh.inter);
    const MlpCase m(sh);
    const DeviceMlp w(m);
    Workspace ws(sh);
    REQUIRE(ws.bytes > 0);
    DeviceBuffer<bf16> dx(m.x.size()), act(static_cast<size_t>(sh.rows * sh.inter));
    dx.upload(m.x);
    act.poison();
    CHECK_OK(k::rms_mlp_clear(ws.buf.get(), sh.rows, sh.d, sh.inter, nullptr));
    CHECK_OK(run_mlp(m, w, dx.get(), act.get(), ws, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto got_act = act.download(), got = dx.download();

    const auto want_act = m.act();
    CHECK_CLOSE(compare(got_act, want_act, kSiluMulRtol, 1e-2 * std::max(rms(want_act), 1e-3)),
                8e-3);
    // Stage 2 from the kernel's own act: only the output's bf16 rounding and
    // fp32 sums apart.
    std::vector<double> out, magnitude;
    m.output(to_double(got_act), out, magnitude);
    CHECK_CLOSE(compare(
                    got, out, 1e-2, 1e-6, [](size_t) { return true; }, &magnitude),
                4e-3);
    // The whole chain from float64's act.
    std::vector<double> exact, exact_magnitude;
    m.output(want_act, exact, exact_magnitude);
    CHECK(compare(got, exact, 1.0, 1.0).rel_l2 < 1e-2);

    // Again on the same x, without clearing: the same bits.
    dx.upload(m.x);
    act.poison();
    CHECK_OK(run_mlp(m, w, dx.get(), act.get(), ws, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(bits_equal(dx.download(), got));
    CHECK(bits_equal(act.download(), got_act));
  }
}

GPU_TEST_CASE("rms_mlp_bf16: replayed from a CUDA graph, the eager bits") {
  require_gpu();
  if (!k::rms_mlp_supported()) return;  // refused there: checked above
  const Shape sh{256, 1280, 3456};
  const MlpCase m(sh);
  const DeviceMlp w(m);
  Workspace ws(sh);
  DeviceBuffer<bf16> dx(m.x.size()), act(static_cast<size_t>(sh.rows * sh.inter));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Eager first: the reference bits.
  dx.upload(m.x);
  CHECK_OK(k::rms_mlp_clear(ws.buf.get(), sh.rows, sh.d, sh.inter, stream));
  CHECK_OK(run_mlp(m, w, dx.get(), act.get(), ws, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto eager = dx.download();
  // The graph holds the clear (a workspace poisoned between replays, as the
  // runtime's poison_memory does) and two calls, the second on the first's
  // output as consecutive layers run.
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const int rc_clear = k::rms_mlp_clear(ws.buf.get(), sh.rows, sh.d, sh.inter, stream);
  const int rc1 = run_mlp(m, w, dx.get(), act.get(), ws, stream);
  const int rc2 = run_mlp(m, w, dx.get(), act.get(), ws, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CHECK_OK(rc_clear);
  CHECK_OK(rc1);
  CHECK_OK(rc2);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<bf16> twice;
  for (int replay = 0; replay < 2; ++replay) {
    dx.upload(m.x);
    act.poison();
    CUDA_OK(cudaMemset(ws.buf.get(), 0xff, ws.bytes));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto got = dx.download();
    if (replay == 0) twice = got;
    CHECK(bits_equal(got, twice));
  }
  // The second call's output is the first's plus its MLP: eager again.
  dx.upload(eager);
  CHECK_OK(run_mlp(m, w, dx.get(), act.get(), ws, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK(bits_equal(dx.download(), twice));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

GPU_TEST_CASE("rms_mlp_bf16: bad arguments are refused") {
  require_gpu();
  DeviceBuffer<bf16> buf(1 << 16);
  DeviceBuffer<char> ws(1 << 24);
  const int bad = static_cast<int>(cudaErrorInvalidValue);
  auto call = [&](int64_t rows, int64_t d, int64_t inter, float eps, size_t ws_bytes) {
    return k::rms_mlp_bf16(buf.get(), buf.get(), buf.get(), buf.get(), buf.get(), buf.get(), rows,
                           d, inter, eps, ws.get(), ws_bytes, nullptr);
  };
  CHECK(call(4, 64, 100, 1e-6f, 1 << 24) == bad);  // inter not whole blocks of 128
  CHECK(call(4, 60, 128, 1e-6f, 1 << 24) == bad);  // d not a multiple of 8
  CHECK(call(4, 64, 128, -1.0f, 1 << 24) == bad);  // eps negative
  CHECK(call(4, 64, 128, NAN, 1 << 24) == bad);
  if (k::rms_mlp_supported()) CHECK(call(256, 64, 128, 1e-6f, 1) == bad);  // workspace too small
  CHECK(call(0, 64, 128, 1e-6f, 0) == 0);                                  // nothing to do
}
