// The kernels inside CUDA graphs: a small transformer block (window gather,
// norms, products with bias and residual, rotary, varlen attention, gated MLP)
// captured once and replayed on new inputs and new sequence lengths must give
// exactly what eager launches give.
#include "gpu_test_util.hpp"
#include "pdl_probe.hpp"

#include <encoder_kit/cuda/check.hpp>  // detail::pdl_enabled

#include <algorithm>
#include <numeric>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;
using Ep = k::GemmPlan::Epilogue;

namespace {

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Runs f() under stream capture and returns the instantiated graph.
template <typename F>
cudaGraphExec_t capture(cudaStream_t s, F f) {
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  f();
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes > 0);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  return exec;
}

constexpr int kHeads = 2, kHeadDim = 80, kHidden = kHeads * kHeadDim, kInter = 344;
constexpr int64_t kTokens = 256;  // the captured budget
constexpr int kMaxSeqs = 6, kMaxSeqlen = 128;

struct Block {
  LtHandle lt;
  k::GemmPlan qkv_plan, o_plan, up_plan, down_plan;
  DeviceBuffer<bf16> norm_w{kHidden}, w_qkv{3 * kHidden * kHidden}, b_qkv{3 * kHidden},
      w_o{kHidden * kHidden}, b_o{kHidden}, w_up{2 * kInter * kHidden}, b_up{2 * kInter},
      w_down{kHidden * kInter}, b_down{kHidden};
  DeviceBuffer<float> cos_t{kTokens * kHeadDim / 2}, sin_t{kTokens * kHeadDim / 2};
  DeviceBuffer<int32_t> cu{kMaxSeqs + 1}, index{kTokens};
  DeviceBuffer<bf16> input{kTokens * kHidden}, x{kTokens * kHidden}, h{kTokens * kHidden},
      qkv{kTokens * 3 * kHidden}, attn{kTokens * kHidden}, gate_up{kTokens * 2 * kInter},
      act{kTokens * kInter};
  DeviceBuffer<unsigned char> ws{k::GemmPlan::workspace_bytes()};

  Block() {
    CHECK_OK(qkv_plan.initialize(kTokens, 3 * kHidden, kHidden, Ep::Bias, false));
    CHECK_OK(o_plan.initialize(kTokens, kHidden, kHidden, Ep::Bias, true));
    CHECK_OK(up_plan.initialize(kTokens, 2 * kInter, kHidden, Ep::Bias, false));
    CHECK_OK(down_plan.initialize(kTokens, kHidden, kInter, Ep::Bias, true));
    const float s = 0.1f;
    norm_w.upload(random_bf16(norm_w.size(), 0.1f, 1.0f));
    for (auto* w : {&w_qkv, &b_qkv, &w_o, &b_o, &w_up, &b_up, &w_down, &b_down})
      w->upload(random_bf16(w->size(), s));
    std::vector<float> c(cos_t.size()), sn(sin_t.size());
    for (size_t i = 0; i < c.size(); ++i) {
      c[i] = std::cos(0.37f * static_cast<float>(i));
      sn[i] = std::sin(0.37f * static_cast<float>(i));
    }
    cos_t.upload(c);
    sin_t.upload(sn);
  }

  // New activations, window order and sequence lengths in the captured buffers.
  void set_inputs(const std::vector<int>& lens) {
    input.upload(random_bf16(input.size()));
    std::vector<int32_t> idx(kTokens);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng());
    index.upload(idx);
    std::vector<int32_t> c{0};
    for (int l : lens) c.push_back(c.back() + l);
    while (c.size() < kMaxSeqs + 1) c.push_back(c.back());
    cu.upload(c);
  }

  void forward(cudaStream_t s) {
    const int64_t T = kTokens;
    CHECK_OK(k::gather_rows_bf16(input.get(), index.get(), x.get(), T, kHidden, s));
    CHECK_OK(k::rms_norm_bf16(x.get(), norm_w.get(), h.get(), T, kHidden, 1e-6f, s));
    CHECK_OK(qkv_plan.run(lt.h, h.get(), w_qkv.get(), b_qkv.get(), nullptr, qkv.get(), T, ws.get(),
                          ws.size(), s));
    CHECK_OK(
        k::rotary_bf16(qkv.get(), T, kHeads, kHeadDim, cos_t.get(), sin_t.get(), kHeadDim / 2, s));
    CHECK_OK(k::varlen_attention_bf16(qkv.get(), cu.get(), kMaxSeqs, kMaxSeqlen, kHeads, kHeadDim,
                                      1.0f / std::sqrt(float(kHeadDim)), attn.get(), s));
    CHECK_OK(o_plan.run(lt.h, attn.get(), w_o.get(), b_o.get(), x.get(), x.get(), T, ws.get(),
                        ws.size(), s));
    CHECK_OK(k::rms_norm_bf16(x.get(), norm_w.get(), h.get(), T, kHidden, 1e-6f, s));
    CHECK_OK(up_plan.run(lt.h, h.get(), w_up.get(), b_up.get(), nullptr, gate_up.get(), T, ws.get(),
                         ws.size(), s));
    CHECK_OK(k::silu_mul_bf16(gate_up.get(), 2 * kInter, gate_up.get() + kInter, 2 * kInter,
                              act.get(), kInter, T, kInter, s));
    CHECK_OK(down_plan.run(lt.h, act.get(), w_down.get(), b_down.get(), x.get(), x.get(), T,
                           ws.get(), ws.size(), s));
  }

  // The rows the sequences cover (the rest depends on never-written rows).
  std::vector<bf16> covered_output(int64_t covered) {
    auto all = x.download();
    all.resize(static_cast<size_t>(covered * kHidden));
    return all;
  }
};

size_t count_different(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  REQUIRE(a.size() == b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = to_f(a[i]), y = to_f(b[i]);
    if (!(x == y) || std::isnan(x)) ++n;  // equal and finite
  }
  return n;
}

}  // namespace

GPU_TEST_CASE("graph replay of a transformer block equals eager launches") {
  require_gpu();
  Stream stream;
  Block block;
  const std::vector<int> first{64, 100, 0, 37, 40}, second{128, 3, 0, 0, 1, 90};
  const int64_t first_cov = 241, second_cov = 222;

  block.set_inputs(first);
  block.forward(stream.s);  // warm-up outside capture, as the runtime does
  CUDA_OK(cudaStreamSynchronize(stream.s));
  cudaGraphExec_t exec = capture(stream.s, [&] { block.forward(stream.s); });

  for (int round = 0; round < 2; ++round) {
    const auto& lens = round == 0 ? second : first;
    const int64_t covered = round == 0 ? second_cov : first_cov;
    CAPTURE(round);
    block.set_inputs(lens);
    CUDA_OK(cudaGraphLaunch(exec, stream.s));
    CUDA_OK(cudaStreamSynchronize(stream.s));
    const auto replayed = block.covered_output(covered);
    // The same inputs again, eagerly: forward() starts from `input`, so it
    // recomputes everything.
    block.forward(stream.s);
    CUDA_OK(cudaStreamSynchronize(stream.s));
    const auto eager = block.covered_output(covered);
    CHECK(count_different(replayed, eager) == 0);
  }
  cudaGraphExecDestroy(exec);
}

GPU_TEST_CASE("GemmPlan picks an algorithm for an unseen m inside capture") {
  require_gpu();
  Stream stream;
  LtHandle lt;
  k::GemmPlan plan;
  const int64_t m_max = 512, m = 200, n = 256, kk = 128;
  CHECK_OK(plan.initialize(m_max, n, kk, Ep::Bias, false));
  DeviceBuffer<bf16> a(m * kk), w(n * kk), bias(n), c(m * n);
  DeviceBuffer<unsigned char> ws(k::GemmPlan::workspace_bytes());
  a.upload(random_bf16(a.size()));
  w.upload(random_bf16(w.size()));
  bias.upload(random_bf16(bias.size()));
  c.poison();
  cudaGraphExec_t exec = capture(stream.s, [&] {
    CHECK_OK(plan.run(lt.h, a.get(), w.get(), bias.get(), nullptr, c.get(), m, ws.get(), ws.size(),
                      stream.s));
  });
  CUDA_OK(cudaGraphLaunch(exec, stream.s));
  CUDA_OK(cudaStreamSynchronize(stream.s));
  const auto replayed = c.download();
  c.poison();
  CHECK_OK(plan.run(lt.h, a.get(), w.get(), bias.get(), nullptr, c.get(), m, ws.get(), ws.size(),
                    stream.s));
  CUDA_OK(cudaStreamSynchronize(stream.s));
  CHECK(count_different(replayed, c.download()) == 0);
  cudaGraphExecDestroy(exec);
}

GPU_TEST_CASE("dependent launches: each kernel sees its predecessor's writes, eager and replayed") {
  require_gpu();
  // On compute capability 9.0+ the kit's kernels launch with Programmatic
  // Dependent Launch. A chain where each kernel reads what the previous one
  // wrote and overwrites what it read (both hazards) must count exactly, in
  // eager launches and replayed as programmatic graph edges. The kit's kernels
  // never let their dependents start early, so this checks the launches'
  // order, not the wait: the next test, whose primary does let them start,
  // is the one a kernel without its wait fails (checked with such a build).
  int device = 0, major = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CHECK(k::detail::pdl_enabled() == (major >= 9));

  constexpr int64_t n = int64_t{1} << 23;  // 16 MiB a buffer: many blocks draining
  constexpr int kSteps = 100;              // integers up to 256 are exact in bf16
  DeviceBuffer<bf16> a(n), b(n), one(n);
  one.upload(std::vector<bf16>(n, to_bf(1.0f)));
  Stream stream;
  auto chain = [&] {
    for (int i = 0; i < kSteps; ++i)
      if (i % 2 == 0)
        CHECK_OK(k::add_bf16(a.get(), one.get(), b.get(), n, stream.s));
      else
        CHECK_OK(k::add_bf16(b.get(), one.get(), a.get(), n, stream.s));
  };
  auto count_wrong = [&] {
    const auto got = a.download();
    size_t wrong = 0;
    for (const bf16 v : got) wrong += to_f(v) == static_cast<float>(kSteps) ? 0 : 1;
    return wrong;
  };
  CUDA_OK(cudaMemset(a.get(), 0, n * sizeof(bf16)));
  CUDA_OK(cudaMemset(b.get(), 0, n * sizeof(bf16)));
  chain();
  CUDA_OK(cudaStreamSynchronize(stream.s));
  CHECK(count_wrong() == 0);

  cudaGraphExec_t exec = capture(stream.s, chain);
  for (int replay = 0; replay < 3; ++replay) {
    CAPTURE(replay);
    CUDA_OK(cudaMemsetAsync(a.get(), 0, n * sizeof(bf16), stream.s));
    CUDA_OK(cudaMemsetAsync(b.get(), 0, n * sizeof(bf16), stream.s));
    CUDA_OK(cudaGraphLaunch(exec, stream.s));
    CUDA_OK(cudaStreamSynchronize(stream.s));
    CHECK(count_wrong() == 0);
  }
  cudaGraphExecDestroy(exec);
}

GPU_TEST_CASE("dependent launches: a kit kernel waits even when its predecessor lets it start") {
  require_gpu();
  if (!k::detail::pdl_enabled()) {
    MESSAGE("Programmatic Dependent Launch is off on this device: nothing to check");
    return;
  }
  // The primary triggers its dependents at once and writes only ~200 us
  // later, so the kit kernel after it really runs early: without its
  // griddepcontrol.wait it reads the old zeros (and writes 1, not 6). A build
  // with the wait removed fails the element-wise and norm checks every time
  // (H200). The attention kernels' blocks did not start early in that build
  // (large shared memory beside the primary's blocks), so their checks here
  // guard the results, not the wait.
  constexpr int64_t n = int64_t{1} << 20;
  DeviceBuffer<bf16> a(n), one(n), out(n);
  one.upload(std::vector<bf16>(n, to_bf(1.0f)));
  Stream stream;
  auto fresh = [&] {
    CUDA_OK(cudaMemsetAsync(a.get(), 0, n * sizeof(bf16), stream.s));
    CUDA_OK(cudaMemsetAsync(out.get(), 0, n * sizeof(bf16), stream.s));
  };
  auto primary = [&] {
    CUDA_OK(encoder_kit_test::launch_trigger_then_write(a.get(), n, 5.0f, 200, stream.s));
  };
  auto count_not = [&](const DeviceBuffer<bf16>& buf, size_t count, float want) {
    CUDA_OK(cudaStreamSynchronize(stream.s));
    const auto got = buf.download();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += to_f(got[i]) == want ? 0 : 1;
    return wrong;
  };
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    fresh();
    primary();
    CHECK_OK(k::add_bf16(a.get(), one.get(), out.get(), n, stream.s));
    CHECK(count_not(out, n, 6.0f) == 0);
    // A norm over rows of 1024 fives: 1 everywhere (rms of a constant row).
    fresh();
    primary();
    CHECK_OK(k::rms_norm_bf16(a.get(), one.get(), out.get(), n / 1024, 1024, 1e-6f, stream.s));
    CHECK(count_not(out, n, 1.0f) == 0);
  }
  // Attention over windows of constant q = k = v = 5 (cos 1, sin 0 for the
  // fused rotary): every output is 5.
  constexpr int kHeads = 2, kDim = 80, kTokens = 4096;
  DeviceBuffer<bf16> qkv(int64_t{kTokens} * 3 * kHeads * kDim),
      attn(int64_t{kTokens} * kHeads * kDim);
  DeviceBuffer<float> cos_t(int64_t{kTokens} * kDim / 2), sin_t(int64_t{kTokens} * kDim / 2);
  cos_t.upload(std::vector<float>(cos_t.size(), 1.0f));
  sin_t.upload(std::vector<float>(sin_t.size(), 0.0f));
  std::vector<int32_t> cu;
  for (int t = 0; t <= kTokens; t += 64) cu.push_back(t);
  DeviceBuffer<int32_t> dcu(cu.size());
  dcu.upload(cu);
  const int windows = static_cast<int>(cu.size()) - 1;
  for (const bool rotary : {false, true}) {
    CAPTURE(rotary);
    CUDA_OK(cudaMemsetAsync(qkv.get(), 0, qkv.size() * sizeof(bf16), stream.s));
    CUDA_OK(cudaMemsetAsync(attn.get(), 0, attn.size() * sizeof(bf16), stream.s));
    CUDA_OK(
        encoder_kit_test::launch_trigger_then_write(qkv.get(), qkv.size(), 5.0f, 200, stream.s));
    if (rotary)
      CHECK_OK(k::varlen_attention_rotary_bf16(qkv.get(), dcu.get(), windows, 64, kHeads, kDim,
                                               0.1f, cos_t.get(), sin_t.get(), kDim / 2, attn.get(),
                                               stream.s));
    else
      CHECK_OK(k::varlen_attention_bf16(qkv.get(), dcu.get(), windows, 64, kHeads, kDim, 0.1f,
                                        attn.get(), stream.s));
    CHECK(count_not(attn, attn.size(), 5.0f) == 0);
  }
}
