// cpu_layer_bench: one Qwen2.5-VL-7B-width vision block (hidden 1280, 16
// heads of 80, SiLU MLP 3420) on the fp32 CPU kernels of encoder_kit, with
// random weights. Prints the block's useful GFLOP/s (products + attention),
// the fp32 FMA peak it compares against (measured by an FMA loop on every
// thread, with the nominal cores x GHz x lanes x 2 FMA units x 2 beside it)
// and the share, as a one-line table.
//   cpu_layer_bench [--patches N] [--window W] [--runs R] [--threads T]
// --window W splits the patches into attention sequences of W (0: one
// sequence, full attention). --threads sets the pool (as plugin.tuning.cpu_threads does for a plugin).
#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/thread_pool.hpp>

#include <cblas.h>

#include <encgraph/blas_kernels.hpp>

#include <sched.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace k = encoder_kit::cpu;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// ---- peak: an FMA loop with 12 independent accumulators per thread -------
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (auto& x : a) x = _mm256_fmadd_ps(x, m, c);
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (auto& x : a) x = _mm512_fmadd_ps(x, m, c);
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sum = 0.0f;
  for (const float x : lanes) sum += x;
  return sum;
}
#endif

struct Peak {
  const char* isa = "scalar";
  int lanes = 1;
  double measured = 0.0;  // GFLOP/s
  double nominal = 0.0;   // GFLOP/s from cpuinfo MHz
};

double cpuinfo_ghz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double best = 0.0;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0)
      if (auto c = line.find(':'); c != std::string::npos)
        best = std::max(best, std::atof(line.c_str() + c + 1) / 1000.0);
  return best;
}

Peak measure_peak(int threads) {
  Peak p;
  float (*loop)(int64_t) = nullptr;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) {
    p.isa = "avx512";
    p.lanes = 16;
    loop = fma_loop_avx512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.isa = "avx2+fma";
    p.lanes = 8;
    loop = fma_loop_avx2;
  }
#endif
  p.nominal = threads * cpuinfo_ghz() * p.lanes * 2 /*FMA units*/ * 2 /*flops per FMA*/;
  if (!loop) return p;
  const int64_t iters = 40'000'000;
  for (int rep = 0; rep < 3; ++rep) {  // best of 3: the machine may be shared
    std::atomic<bool> go{false};
    std::atomic<float> sink{0.0f};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        sink = sink + loop(iters);
      });
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : ts) t.join();
    const double s = seconds_since(t0);
    const double flops =
        static_cast<double>(threads) * static_cast<double>(iters) * 12 * p.lanes * 2;
    p.measured = std::max(p.measured, flops / s * 1e-9);
  }
  return p;
}

// ---- the block -------------------------------------------------------------
struct Block {
  int64_t n, d = 1280, heads = 16, hd = 80, inter = 3420;
  std::vector<float> norm1, norm2, qkv_w, qkv_b, proj_w, proj_b, gate_w, gate_b, up_w, up_b, down_w,
      down_b, cos, sin;
  std::vector<float> x, normed, qkv, attn, gate, up, scratch;
  std::vector<int32_t> cu;
};

Block make_block(int64_t n, int64_t window) {
  Block b;
  b.n = n;
  const auto d = static_cast<size_t>(b.d), in = static_cast<size_t>(b.inter);
  const auto un = static_cast<size_t>(n);
  const float ws = 1.0f / std::sqrt(static_cast<float>(b.d));
  b.norm1 = random_floats(d, 1.0f, 1);
  b.norm2 = random_floats(d, 1.0f, 2);
  b.qkv_w = random_floats(3 * d * d, ws, 3);
  b.qkv_b = random_floats(3 * d, 0.1f, 4);
  b.proj_w = random_floats(d * d, ws, 5);
  b.proj_b = random_floats(d, 0.1f, 6);
  b.gate_w = random_floats(in * d, ws, 7);
  b.gate_b = random_floats(in, 0.1f, 8);
  b.up_w = random_floats(in * d, ws, 9);
  b.up_b = random_floats(in, 0.1f, 10);
  b.down_w = random_floats(d * in, 1.0f / std::sqrt(static_cast<float>(b.inter)), 11);
  b.down_b = random_floats(d, 0.1f, 12);
  b.cos = random_floats(un * static_cast<size_t>(b.hd / 2), 1.0f, 13);
  b.sin = random_floats(un * static_cast<size_t>(b.hd / 2), 1.0f, 14);
  b.x = random_floats(un * d, 1.0f, 15);
  b.normed.resize(un * d);
  b.qkv.resize(3 * un * d);
  b.attn.resize(un * d);
  b.gate.resize(un * in);
  b.up.resize(un * in);
  const int64_t w = window > 0 ? window : n;
  for (int64_t s = 0; s < n; s += w) b.cu.push_back(static_cast<int32_t>(s));
  b.cu.push_back(static_cast<int32_t>(n));
  b.scratch.resize(k::attention_scratch_floats(std::min(w, n), b.hd));
  return b;
}

double block_flops(const Block& b) {
  const double n = static_cast<double>(b.n), d = static_cast<double>(b.d),
               in = static_cast<double>(b.inter);
  double f = 2 * n * (3 * d * d + d * d + 2 * d * in + in * d);
  for (size_t s = 0; s + 1 < b.cu.size(); ++s) {
    const double len = b.cu[s + 1] - b.cu[s];
    f += 4 * len * len * d;  // q k^T and p v over all heads
  }
  return f;
}

// Seconds in [products, attention, other passes], added to `t`.
void run_block(Block& b, double t[3]) {
  const int64_t n = b.n, d = b.d;
  auto t0 = Clock::now();
  auto lap = [&](int i) {
    t[i] += seconds_since(t0);
    t0 = Clock::now();
  };
  k::rms_norm(b.x.data(), n, d, b.norm1.data(), 1e-6f, b.normed.data());
  lap(2);
  k::linear(b.normed.data(), n, d, b.qkv_w.data(), b.qkv_b.data(), 3 * d, b.qkv.data());
  lap(0);
  k::rotary_half(b.qkv.data(), n, 3 * d, b.heads, b.hd, b.cos.data(), b.sin.data());
  k::rotary_half(b.qkv.data() + d, n, 3 * d, b.heads, b.hd, b.cos.data(), b.sin.data());
  lap(2);
  k::varlen_attention(b.qkv.data(), b.qkv.data() + d, b.qkv.data() + 2 * d, 3 * d, b.attn.data(), d,
                      b.cu.data(), static_cast<int64_t>(b.cu.size()) - 1, b.heads, b.hd,
                      1.0f / std::sqrt(static_cast<float>(b.hd)), b.scratch.data(),
                      b.scratch.size());
  lap(1);
  k::linear(b.attn.data(), n, d, b.proj_w.data(), b.proj_b.data(), d, b.x.data(), true);
  lap(0);
  k::rms_norm(b.x.data(), n, d, b.norm2.data(), 1e-6f, b.normed.data());
  lap(2);
  k::linear(b.normed.data(), n, d, b.gate_w.data(), b.gate_b.data(), b.inter, b.gate.data());
  k::linear(b.normed.data(), n, d, b.up_w.data(), b.up_b.data(), b.inter, b.up.data());
  lap(0);
  k::silu_mul(b.gate.data(), b.up.data(), static_cast<size_t>(n * b.inter));
  lap(2);
  k::linear(b.gate.data(), n, b.inter, b.down_w.data(), b.down_b.data(), d, b.x.data(), true);
  lap(0);
  // Keep the residual stream bounded over many runs.
  k::rms_norm(b.x.data(), n, d, b.norm1.data(), 1e-6f, b.x.data());
  lap(2);
}

int64_t arg(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  // The kernels OpenBLAS gets under encgraph (blas_kernels.hpp): it is linked
  // here, so it read OPENBLAS_CORETYPE before main; start again with it set.
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && encgraph::choose_blas_kernels() != nullptr) {
    execv("/proc/self/exe", argv);
    std::perror("cpu_layer_bench: re-executing with OPENBLAS_CORETYPE set");
  }
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::puts("cpu_layer_bench [--patches N=1024] [--window W=0] [--runs R=5] [--threads T]");
      return 0;
    }
  const int64_t n = std::max<int64_t>(1, arg(argc, argv, "--patches", 1024));
  const int64_t window = std::max<int64_t>(0, arg(argc, argv, "--window", 0));
  const int64_t runs = std::max<int64_t>(1, arg(argc, argv, "--runs", 5));
  const int64_t threads = arg(argc, argv, "--threads", 0);
  if (threads > 0) k::set_threads(static_cast<int>(threads));
  const int pool_threads = k::pool().size();
  // Which OpenBLAS kernels run the products: a DYNAMIC_ARCH build picks them
  // from CPUID, which a virtual machine may mask (OPENBLAS_CORETYPE overrides).
  std::printf("OpenBLAS: %s; kernels for %s\n", openblas_get_config(), openblas_get_corename());

  Block b = make_block(n, window);
  double warm[3] = {0, 0, 0};
  run_block(b, warm);  // warm-up: page faults, BLAS buffers, thread start
  std::vector<double> totals;
  std::vector<std::vector<double>> parts;
  for (int64_t r = 0; r < runs; ++r) {
    double t[3] = {0, 0, 0};
    run_block(b, t);
    totals.push_back(t[0] + t[1] + t[2]);
    parts.push_back({t[0], t[1], t[2]});
  }
  const size_t mid = static_cast<size_t>(
      std::distance(totals.begin(), std::min_element(totals.begin(), totals.end())));
  std::vector<double> sorted = totals;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  // The phase split is shown for the fastest run (phases do not have one median).
  const std::vector<double>& ph = parts[mid];
  const double flops = block_flops(b);
  const double achieved = flops / median * 1e-9;
  const Peak peak = measure_peak(pool_threads);
  const double share = peak.measured > 0 ? achieved / peak.measured : 0.0;

  std::printf("%-8s %-7s %-8s %-5s %-9s %-10s %-8s %-8s %-8s %-10s %-12s %-12s %-6s\n", "patches",
              "window", "threads", "runs", "GFLOP", "median_ms", "gemm_ms", "attn_ms", "other_ms",
              "GFLOP/s", "peak_meas", "peak_nominal", "share");
  std::printf(
      "%-8lld %-7lld %-8d %-5lld %-9.2f %-10.1f %-8.1f %-8.1f %-8.1f %-10.1f %-12.1f "
      "%-12.1f %4.1f%%\n",
      static_cast<long long>(n), static_cast<long long>(window), pool_threads,
      static_cast<long long>(runs), flops * 1e-9, median * 1e3, ph[0] * 1e3, ph[1] * 1e3,
      ph[2] * 1e3, achieved, peak.measured, peak.nominal, share * 100);
  std::printf(
      "peak: %s FMA loop, 12 accumulators x %d lanes x 2 flops, on %d threads; nominal = "
      "threads x %.2f GHz (cpuinfo) x %d lanes x 2 FMA units x 2\n",
      peak.isa, peak.lanes, pool_threads, cpuinfo_ghz(), peak.lanes);
  return 0;
}
