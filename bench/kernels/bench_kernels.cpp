// Micro-benchmark of the shared CUDA kernels at Qwen2.5-VL-7B vision-tower
// shapes (hidden 1280, 16 heads of 80, MLP 3420 padded to 3424, merger 5120 ->
// 3584) on a 64k-patch budget, plus SigLIP-so400m attention (head_dim 72).
// Each figure is the median over many CUDA-event-timed batches after warm-up
// (a batch is a CUDA graph of its calls, replayed), on random (never zero) data. Prints a table;
// --table PATH also writes it.
//   bench_kernels [--table PATH] [--tokens N]
//     [--only
//     gemm|small|attn|attnfull|attnshort|buckets|window|memory|mlp|mlpsmall|qkv|siglip|sam|fp8]
//                 [--attn-len N]  (with --only attnshort: that sequence length alone)
#include <encoder_kit/cuda/check.hpp>  // detail::sm90_attention_supported
#include <encoder_kit/cuda/fp8.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/seq_buckets.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace k = encoder_kit::cuda;
using bf16 = k::bf16;
using Ep = k::GemmPlan::Epilogue;

namespace {

#define BENCH_CHECK(expr)                                                       \
  do {                                                                          \
    const int rc_ = (expr);                                                     \
    if (rc_ != 0) {                                                             \
      std::fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #expr, \
                   k::error_string(rc_), k::last_error_detail());               \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
#define BENCH_CUDA(expr) BENCH_CHECK(static_cast<int>(expr))

struct Row {
  std::string kernel, shape;
  double us, tflops, gbs;
  std::string note;
};
std::vector<Row> g_rows;

cudaStream_t g_stream = nullptr;

// Median microseconds per call of f: batches sized to ~0.3 ms, 25 of them.
// A batch is a CUDA graph of its calls, replayed, as the runtime replays its
// forwards: small kernels are timed without the host's launch cost (which
// back-to-back eager calls of a few microseconds each would measure instead).
// Where f cannot be captured, eager batches.
double time_us(const std::function<void()>& f) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();  // warm-up
  cudaGraphExec_t exec = nullptr;
  auto batch = [&](int reps) {
    BENCH_CUDA(cudaEventRecord(a, g_stream));
    if (exec != nullptr)
      BENCH_CUDA(cudaGraphLaunch(exec, g_stream));
    else
      for (int i = 0; i < reps; ++i) f();
    BENCH_CUDA(cudaEventRecord(b, g_stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0.0f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    return 1000.0 * ms / reps;
  };
  const double first = batch(1);
  const int reps = std::clamp(static_cast<int>(300.0 / std::max(first, 1e-3)), 1, 200);
  cudaGraph_t graph = nullptr;
  if (cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    for (int i = 0; i < reps; ++i) f();
    if (cudaStreamEndCapture(g_stream, &graph) != cudaSuccess ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      exec = nullptr;
  }
  (void)cudaGetLastError();  // a failed capture falls back to eager batches
  if (exec != nullptr) BENCH_CUDA(cudaGraphLaunch(exec, g_stream));  // warm-up
  std::vector<double> samples;
  for (int s = 0; s < 25; ++s) samples.push_back(batch(reps));
  std::sort(samples.begin(), samples.end());
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return samples[samples.size() / 2];
}

// Host microseconds one call of f takes to submit (eager: what a forward
// without graphs pays per launch besides the GPU time), over 200 calls.
double host_submit_us(const std::function<void()>& f) {
  BENCH_CUDA(cudaStreamSynchronize(g_stream));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) f();
  const auto end = std::chrono::steady_clock::now();
  BENCH_CUDA(cudaStreamSynchronize(g_stream));
  return std::chrono::duration<double, std::micro>(end - start).count() / 200;
}

void add_row(const std::string& kernel, const std::string& shape, double us, double flops,
             double bytes, const std::string& note = "") {
  g_rows.push_back({kernel, shape, us, flops / us * 1e-6, bytes / us * 1e-3, note});
  std::printf("%-22s %-34s %10.1f us %8.1f TFLOP/s %8.0f GB/s  %s\n", kernel.c_str(), shape.c_str(),
              us, flops / us * 1e-6, bytes / us * 1e-3, note.c_str());
  std::fflush(stdout);
}

// Device memory filled from a 16 MiB random pattern (cheap to make, never zero).
struct Pool {
  std::vector<void*> blocks;
  bf16* pattern = nullptr;
  size_t pattern_elems = size_t{8} << 20;
  Pool() {
    std::mt19937 rng(1234);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<bf16> host(pattern_elems);
    for (auto& v : host) v = __float2bfloat16(d(rng));
    BENCH_CUDA(cudaMalloc(&pattern, pattern_elems * sizeof(bf16)));
    BENCH_CUDA(
        cudaMemcpy(pattern, host.data(), pattern_elems * sizeof(bf16), cudaMemcpyHostToDevice));
    blocks.push_back(pattern);
  }
  ~Pool() {
    for (void* p : blocks) cudaFree(p);
  }
  // n bf16 values copied from the N(0, 1) pattern.
  bf16* bf(size_t n) {
    bf16* p = nullptr;
    BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(n, 8) * sizeof(bf16)));
    blocks.push_back(p);
    for (size_t off = 0; off < n; off += pattern_elems)
      BENCH_CUDA(cudaMemcpy(p + off, pattern, std::min(pattern_elems, n - off) * sizeof(bf16),
                            cudaMemcpyDeviceToDevice));
    return p;
  }
  template <typename T>
  T* raw(size_t n) {
    T* p = nullptr;
    BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    blocks.push_back(p);
    return p;
  }
};

std::string shape3(int64_t m, int64_t n, int64_t kk) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk);
}

// Forms of one computation side by side: each timed once a round, three
// rounds, medians, so that the card's drift under load hits them alike.
using Forms = std::vector<std::pair<std::string, std::function<void()>>>;
void alternate(const std::string& kernel, const std::string& shape, double flops, double bytes,
               const Forms& forms) {
  std::vector<std::vector<double>> us(forms.size());
  for (int round = 0; round < 3; ++round)
    for (size_t f = 0; f < forms.size(); ++f) us[f].push_back(time_us(forms[f].second));
  for (size_t f = 0; f < forms.size(); ++f) {
    std::sort(us[f].begin(), us[f].end());
    add_row(kernel, shape, us[f][1], flops, bytes, forms[f].first + " (median of 3, alternating)");
  }
}

// Square products for about `seconds`, untimed, so that the first rows do not
// run on an idle card's higher clocks: an H200 gave 457 µs for an attention
// kernel timed first in its process and 499 µs for the same kernel a few
// seconds later (measured on the bundle of ce67983).
void warm_card(Pool& pool, cublasLtHandle_t lt, void* ws, double seconds) {
  constexpr int64_t kN = 4096;
  k::GemmPlan plan;
  BENCH_CHECK(plan.initialize(kN, kN, kN, Ep::None, false));
  bf16* A = pool.bf(static_cast<size_t>(kN * kN));
  bf16* C = pool.bf(static_cast<size_t>(kN * kN));
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    for (int i = 0; i < 20; ++i)
      BENCH_CHECK(plan.run(lt, A, A, nullptr, nullptr, C, kN, ws, k::GemmPlan::workspace_bytes(),
                           g_stream));
    BENCH_CUDA(cudaStreamSynchronize(g_stream));
  }
}

void bench_gemm(Pool& pool, cublasLtHandle_t lt, void* ws, const std::string& name, int64_t m,
                int64_t n, int64_t kk, Ep ep, bool residual) {
  k::GemmPlan plan;
  BENCH_CHECK(plan.initialize(m, n, kk, ep, residual));
  bf16* A = pool.bf(static_cast<size_t>(m * kk));
  bf16* W = pool.bf(static_cast<size_t>(n * kk));
  bf16* bias = ep == Ep::None ? nullptr : pool.bf(static_cast<size_t>(n));
  bf16* C = pool.bf(static_cast<size_t>(m * n));
  bf16* R = residual ? pool.bf(static_cast<size_t>(m * n)) : nullptr;
  auto run = [&] {
    BENCH_CHECK(plan.run(lt, A, W, bias, R, C, m, ws, k::GemmPlan::workspace_bytes(), g_stream));
  };
  const double flops = 2.0 * m * n * kk;
  const double bytes = 2.0 * (m * kk + n * kk + m * n * (residual ? 2 : 1));
  add_row(name, shape3(m, n, kk), time_us(run), flops, bytes, "heuristic");
  BENCH_CHECK(plan.tune(lt, A, W, bias, R, C, m, ws, k::GemmPlan::workspace_bytes(), g_stream, 16));
  const std::string pick = plan.choice_for(m);
  add_row(name, shape3(m, n, kk), time_us(run), flops, bytes,
          "tuned (best of 16 + own): " + (pick.rfind("sm90", 0) == 0 ? pick : "cuBLASLt"));
  // Our Hopper kernel at each k split, side by side with the rows above.
  const bool own = k::detail::sm90_gemm_supported() && (ep == Ep::None || ep == Ep::Bias) &&
                   n % 8 == 0 && kk % 8 == 0;
  if (own)
    for (const int splits : {1, 2, 4, 8})
      add_row(
          name, shape3(m, n, kk), time_us([&] {
            BENCH_CHECK(k::detail::gemm_sm90_bf16(A, W, bias, R, C, m, n, kk, splits, g_stream));
          }),
          flops, bytes, "own Hopper kernel, k split " + std::to_string(splits));
  if (m <= 4096) {
    std::printf("  host submit per call: cuBLASLt (tuned plan) %.1f us", host_submit_us(run));
    if (own)
      std::printf(", own kernel %.1f us", host_submit_us([&] {
                    BENCH_CHECK(k::detail::gemm_sm90_bf16(A, W, bias, R, C, m, n, kk, 1, g_stream));
                  }));
    std::printf("\n");
  }
  // An untuned plan timed after the tuned one: tells a worse pick from clock
  // or power drift after the search's seconds of full load.
  k::GemmPlan fresh;
  BENCH_CHECK(fresh.initialize(m, n, kk, ep, residual));
  auto run_fresh = [&] {
    BENCH_CHECK(fresh.run(lt, A, W, bias, R, C, m, ws, k::GemmPlan::workspace_bytes(), g_stream));
  };
  add_row(name, shape3(m, n, kk), time_us(run_fresh), flops, bytes, "heuristic, after tuning");
  // Where tuning changed the pick: both timed in alternation, three times
  // each, so that the card's drift hits both alike.
  if (fresh.choice_for(m) != pick) {
    std::vector<double> tuned, heuristic;
    for (int i = 0; i < 3; ++i) {
      tuned.push_back(time_us(run));
      heuristic.push_back(time_us(run_fresh));
    }
    std::sort(tuned.begin(), tuned.end());
    std::sort(heuristic.begin(), heuristic.end());
    add_row(name, shape3(m, n, kk), tuned[1], flops, bytes, "tuned, alternating (median of 3)");
    add_row(name, shape3(m, n, kk), heuristic[1], flops, bytes,
            "heuristic, alternating (median of 3)");
  }
}

// Attention over a small budget as the Qwen plugins launch it: `rows` patch
// rows with room for `frames` frames, filled by frames of `lengths` (the rest
// empty): the doubling groups of encoder_kit::length_buckets (one launch a
// group, most of them empty here) against groups merged up to 128 and 256
// units (the plugins' bound: kBucketMergeUnits), alternating. Frame slots as
// the plugins' capacities give them: Qwen2.5-VL 16 at 256 rows and 64 at
// 1024; Qwen3-VL 64 and 128.
void bench_buckets(Pool& pool, const std::string& what, int64_t rows, int64_t frames,
                   const std::vector<int64_t>& lengths, int heads, int hd) {
  std::vector<int32_t> cu(static_cast<size_t>(frames + 1), 0);
  double flops = 0.0;
  for (size_t i = 0; i < cu.size() - 1; ++i) {
    const int64_t len = i < lengths.size() ? lengths[i] : 0;
    cu[i + 1] = cu[i] + static_cast<int32_t>(len);
    flops += 4.0 * static_cast<double>(len * len) * hd * heads;
  }
  BENCH_CHECK(cu.back() <= rows ? 0 : static_cast<int>(cudaErrorInvalidValue));
  int32_t* d_cu = pool.raw<int32_t>(cu.size());
  BENCH_CUDA(cudaMemcpy(d_cu, cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  bf16* qkv = pool.bf(static_cast<size_t>(rows * 3 * heads * hd));
  bf16* out = pool.bf(static_cast<size_t>(rows * heads * hd));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Forms forms;
  for (const int64_t merge : {int64_t{0}, int64_t{128}, int64_t{256}}) {
    const auto buckets = encoder_kit::length_buckets(frames, rows, rows, merge);
    forms.emplace_back((merge == 0 ? std::string("doubling groups")
                                   : "merged up to " + std::to_string(merge) + " units") +
                           ", " + std::to_string(buckets.size()) + " launches",
                       [=] {
                         for (const auto& b : buckets)
                           BENCH_CHECK(k::varlen_attention_bf16(
                               qkv, d_cu + b.first, static_cast<int>(b.count),
                               static_cast<int>(b.max_seqlen), heads, hd, scale, out, g_stream));
                       });
  }
  const double bytes = 2.0 * static_cast<double>(cu.back()) * heads * hd * 4;
  alternate("attn buckets " + what,
            std::to_string(rows) + " rows, " + std::to_string(frames) + " frames", flops, bytes,
            forms);
}

// The MLP's first half at m rows, as the Qwen2.5-VL-7B plugin runs it (3420
// features padded to I = 3456, gate/up rows blocked by 128): the cuBLASLt
// [gate | up] product plus the silu_mul pass over the blocked columns, against
// the Hopper kernel with SiLU·mul in its epilogue; and that kernel's plain form
// against cuBLASLt on the same product (how far its main loop is from cuBLASLt's).
void bench_mlp(Pool& pool, cublasLtHandle_t lt, void* ws, int64_t m) {
  constexpr int64_t I = 3456, D = 1280, B = k::kGateUpBlock;
  k::GemmPlan plan;
  BENCH_CHECK(plan.initialize(m, 2 * I, D, Ep::Bias, false));
  bf16* x = pool.bf(static_cast<size_t>(m * D));
  bf16* w = pool.bf(static_cast<size_t>(k::gate_up_blocked_rows(I) * D));
  bf16* b = pool.bf(static_cast<size_t>(k::gate_up_blocked_rows(I)));
  bf16* gu = pool.bf(static_cast<size_t>(m * 2 * I));
  bf16* act = pool.bf(static_cast<size_t>(m * I));
  const double flops = 2.0 * m * 2 * I * D;
  const std::string shape = shape3(m, 2 * I, D);
  const double bytes = 2.0 * (m * D + 2 * I * D + m * I);  // the fused kernel's traffic
  auto cublas_product = [&] {
    BENCH_CHECK(
        plan.run(lt, x, w, b, nullptr, gu, m, ws, k::GemmPlan::workspace_bytes(), g_stream));
  };
  auto silu_pass = [&] {
    BENCH_CHECK(k::silu_mul_bf16(gu, 2 * B, gu + B, 2 * B, act, B, m * (I / B), B, g_stream));
  };
  Forms forms = {{"cuBLASLt, then silu_mul", [&] {
                    cublas_product();
                    silu_pass();
                  }}};
  const bool own = k::gate_up_silu_mul_supported();
  if (own)
    for (const auto& [tile_n, splits] : {std::pair{0, 0}, std::pair{256, 1}, std::pair{256, 2},
                                         std::pair{128, 1}, std::pair{128, 2}})
      forms.emplace_back("fused, " + (tile_n == 0 ? std::string("tiles and k split chosen")
                                                  : "tiles of " + std::to_string(tile_n) +
                                                        ", k split " + std::to_string(splits)),
                         [&, tile_n = tile_n, splits = splits] {
                           BENCH_CHECK(k::gate_up_silu_mul_bf16(x, w, b, act, m, D, I, I, g_stream,
                                                                splits, tile_n));
                         });
  alternate("mlp gate_up+silu", shape, flops, bytes, forms);
  // With the RMSNorm in front (norm2): the norm pass then either product,
  // against the norm inside the fused kernel (its weight folded into w).
  bf16* normed = pool.bf(static_cast<size_t>(m * D));
  bf16* norm_w = pool.bf(static_cast<size_t>(D));
  auto norm = [&] { BENCH_CHECK(k::rms_norm_bf16(x, norm_w, normed, m, D, 1e-6f, g_stream)); };
  forms = {{"norm, cuBLASLt, silu_mul", [&] {
              norm();
              BENCH_CHECK(plan.run(lt, normed, w, b, nullptr, gu, m, ws,
                                   k::GemmPlan::workspace_bytes(), g_stream));
              silu_pass();
            }}};
  if (own) {
    forms.emplace_back("norm, then fused", [&] {
      norm();
      BENCH_CHECK(k::gate_up_silu_mul_bf16(normed, w, b, act, m, D, I, I, g_stream));
    });
    for (const int tile_n : {0, 256, 128})
      forms.emplace_back("norm in the fused kernel" +
                             (tile_n == 0 ? std::string() : ", tiles of " + std::to_string(tile_n)),
                         [&, tile_n] {
                           BENCH_CHECK(k::rms_gate_up_silu_mul_bf16(x, w, b, act, m, D, I, I, 1e-6f,
                                                                    g_stream, 0, tile_n));
                         });
  }
  alternate("mlp norm+gate_up+silu", shape, flops, bytes, forms);
  if (!own) return;
  add_row("mlp gate_up", shape, time_us(cublas_product), flops, bytes, "cuBLASLt, bias");
  add_row("mlp gate_up", shape, time_us([&] {
            BENCH_CHECK(k::detail::gemm_sm90_bf16(x, w, b, nullptr, gu, m, 2 * I, D, 0, g_stream));
          }),
          flops, bytes, "own Hopper kernel, bias");
}

// norm1 and the qkv product at m rows, as the Qwen2.5-VL-7B plugin runs them:
// the norm pass then cuBLASLt's tuned product, against the product with the
// norm inside our Hopper kernel (rms_linear_bf16; norm1's weight folded into
// W), alternating; and our kernel's plain product after the norm.
void bench_qkv(Pool& pool, cublasLtHandle_t lt, void* ws, int64_t m) {
  constexpr int64_t D = 1280, N = 3 * D;
  k::GemmPlan plan;
  BENCH_CHECK(plan.initialize(m, N, D, Ep::Bias, false));
  bf16* x = pool.bf(static_cast<size_t>(m * D));
  bf16* normed = pool.bf(static_cast<size_t>(m * D));
  bf16* norm_w = pool.bf(static_cast<size_t>(D));
  bf16* w = pool.bf(static_cast<size_t>(N * D));
  bf16* b = pool.bf(static_cast<size_t>(N));
  bf16* y = pool.bf(static_cast<size_t>(m * N));
  BENCH_CHECK(
      plan.tune(lt, normed, w, b, nullptr, y, m, ws, k::GemmPlan::workspace_bytes(), g_stream, 16));
  auto norm = [&] { BENCH_CHECK(k::rms_norm_bf16(x, norm_w, normed, m, D, 1e-6f, g_stream)); };
  Forms forms = {{"norm, cuBLASLt (tuned: " +
                      std::string(plan.choice_for(m).rfind("sm90", 0) == 0 ? "own" : "cuBLASLt") +
                      ")",
                  [&] {
                    norm();
                    BENCH_CHECK(plan.run(lt, normed, w, b, nullptr, y, m, ws,
                                         k::GemmPlan::workspace_bytes(), g_stream));
                  }}};
  if (k::rms_linear_supported()) {
    forms.emplace_back("norm, own kernel", [&] {
      norm();
      BENCH_CHECK(k::detail::gemm_sm90_bf16(normed, w, b, nullptr, y, m, N, D, 0, g_stream));
    });
    forms.emplace_back("norm inside own kernel (rms_linear)", [&] {
      BENCH_CHECK(k::rms_linear_bf16(x, w, b, y, m, N, D, 1e-6f, g_stream));
    });
  }
  alternate("qkv norm1+product", shape3(m, N, D), 2.0 * m * N * D, 2.0 * (m * D + N * D + m * N),
            forms);
}

// Sequences of `len` tokens (the last one shorter) filling `tokens`, plus
// `padded` zero-length slots.
std::vector<int32_t> cu_for(int64_t tokens, int len, int padded) {
  std::vector<int32_t> cu{0};
  while (cu.back() < tokens)
    cu.push_back(static_cast<int32_t>(std::min<int64_t>(cu.back() + len, tokens)));
  for (int i = 0; i < padded; ++i) cu.push_back(cu.back());
  return cu;
}

// hopper_only: on Hopper, the default and the Hopper kernel without the mma.sync rows.
void bench_attention(Pool& pool, const std::string& name, int64_t tokens, int len, int padded,
                     int heads, int head_dim, bool hopper_only = false) {
  const auto cu = cu_for(tokens, len, padded);
  int32_t* dcu = pool.raw<int32_t>(cu.size());
  BENCH_CUDA(cudaMemcpy(dcu, cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  bf16* qkv = pool.bf(static_cast<size_t>(tokens * 3 * heads * head_dim));
  bf16* out = pool.bf(static_cast<size_t>(tokens * heads * head_dim));
  const int max_seqs = static_cast<int>(cu.size()) - 1;
  double flops = 0.0;
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    const double l = cu[s + 1] - cu[s];
    flops += 4.0 * l * l * heads * head_dim;
  }
  const double bytes = 2.0 * tokens * heads * head_dim * 4;  // read q, k, v; write out
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::string shape = std::to_string(tokens) + " tok, seq " + std::to_string(len) + ", " +
                            std::to_string(heads) + "x" + std::to_string(head_dim) +
                            (padded ? ", +" + std::to_string(padded) + " empty" : "");
  add_row(name, shape, time_us([&] {
            BENCH_CHECK(k::varlen_attention_bf16(qkv, dcu, max_seqs, len, heads, head_dim, scale,
                                                 out, g_stream));
          }),
          flops, bytes, "default");
  // Each instance that can take the shape, forced (the dispatch's pick is the
  // "default" row above).
  k::AttentionParams p;
  p.qkv = qkv;
  p.cu_seqlens = dcu;
  p.max_seqs = max_seqs;
  p.max_seqlen = len;
  p.num_heads = heads;
  p.head_dim = head_dim;
  p.scale = scale;
  p.out = out;
  p.stream = g_stream;
  std::vector<k::AttentionKernel> kernels;
  if (!hopper_only || !k::detail::sm90_attention_supported())
    kernels = {k::AttentionKernel::Warps4, k::AttentionKernel::Warps8};
  if (k::detail::sm90_attention_supported()) kernels.push_back(k::AttentionKernel::Hopper);
  for (const k::AttentionKernel kernel : kernels)
    add_row(name, shape, time_us([&] { BENCH_CHECK(k::run_attention(p, kernel)); }), flops, bytes,
            k::attention_kernel_name(kernel));
}

// DeepSeek-OCR-2's SAM attention as the plugin launches it (AttentionExtras:
// q, k, v column blocks of one qkv row, 12 heads of 64, the decomposed
// relative-position bias over an n x n grid): the default pick, then each
// instance that takes it. Useful work counts Q K^T and P V only.
void bench_sam(Pool& pool, const std::string& name, int seqs, int n) {
  const int heads = 12, head_dim = 64, len = n * n;
  const int64_t rows = int64_t{seqs} * len, width = int64_t{heads} * head_dim;
  bf16* qkv = pool.bf(static_cast<size_t>(rows * 3 * width));
  bf16* out = pool.bf(static_cast<size_t>(rows * width));
  // Small constant tables (0x3c3c: about 0.0115): a bias of the trained
  // model's size, which leaves the softmax as sharp as the logits make it.
  const size_t table = static_cast<size_t>((2 * n - 1 + 7) / 8 * 8) * head_dim;
  bf16* rel_h = pool.raw<bf16>(table);
  bf16* rel_w = pool.raw<bf16>(table);
  BENCH_CUDA(cudaMemset(rel_h, 0x3c, table * sizeof(bf16)));
  BENCH_CUDA(cudaMemset(rel_w, 0x3c, table * sizeof(bf16)));
  k::AttentionExtras ax;
  ax.q = qkv;
  ax.k = qkv + width;
  ax.v = qkv + 2 * width;
  ax.q_stride = ax.kv_stride = 3 * width;
  ax.out_stride = width;
  ax.kv_heads = heads;
  ax.rel_h = rel_h;
  ax.rel_w = rel_w;
  ax.hn = ax.wn = n;
  k::AttentionParams p;
  p.max_seqs = seqs;
  p.max_seqlen = len;
  p.num_heads = heads;
  p.head_dim = head_dim;
  p.scale = 0.125f;
  p.out = out;
  p.stream = g_stream;
  p.extras = &ax;
  const double flops = 4.0 * seqs * double(len) * len * heads * head_dim;
  const double bytes = 2.0 * rows * width * 4;
  const std::string shape =
      std::to_string(seqs) + " x " + std::to_string(n) + "x" + std::to_string(n) + ", 12x64, bias";
  add_row(name, shape, time_us([&] { BENCH_CHECK(k::run_attention(p)); }), flops, bytes,
          std::string("default: ") + k::attention_kernel_name(k::pick_attention_kernel(p)));
  std::vector<k::AttentionKernel> kernels{k::AttentionKernel::Warps4};
  if (k::detail::sm90_attention_supported() && k::hopper_takes_extras(p))
    kernels.push_back(k::AttentionKernel::Hopper);
  for (const k::AttentionKernel kernel : kernels)
    add_row(name, shape, time_us([&] { BENCH_CHECK(k::run_attention(p, kernel)); }), flops, bytes,
            k::attention_kernel_name(kernel));
}

// Qwen2.5-VL's window layers two ways: the rotary pass over q and k followed
// by window attention, and rotary fused into the attention's loads.
void bench_window_rotary(Pool& pool, int64_t tokens, int heads, int head_dim, int padded) {
  const auto cu = cu_for(tokens, 64, padded);
  int32_t* dcu = pool.raw<int32_t>(cu.size());
  BENCH_CUDA(cudaMemcpy(dcu, cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  bf16* qkv = pool.bf(static_cast<size_t>(tokens * 3 * heads * head_dim));
  bf16* out = pool.bf(static_cast<size_t>(tokens * heads * head_dim));
  float* cs = pool.raw<float>(static_cast<size_t>(tokens * head_dim / 2));
  BENCH_CUDA(cudaMemset(cs, 0x3c, static_cast<size_t>(tokens * head_dim / 2) * sizeof(float)));
  const int max_seqs = static_cast<int>(cu.size()) - 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const double flops = 4.0 * 64 * tokens * heads * head_dim;
  const double bytes = 2.0 * tokens * heads * head_dim * 4;
  const std::string shape = std::to_string(tokens) + " tok, seq 64, " + std::to_string(heads) +
                            "x" + std::to_string(head_dim) +
                            (padded ? ", +" + std::to_string(padded) + " empty" : "");
  add_row(
      "attn window + rotary", shape, time_us([&] {
        BENCH_CHECK(k::rotary_bf16(qkv, tokens, heads, head_dim, cs, cs, head_dim / 2, g_stream));
        BENCH_CHECK(k::varlen_attention_bf16(qkv, dcu, max_seqs, 64, heads, head_dim, scale, out,
                                             g_stream));
      }),
      flops, bytes, "rotary pass, then attention");
  // Heads a block alternating, three times each: the launch's pick (the
  // default) and each count forced. The kernel is memory-bound: a block
  // walking several heads loads its window's cos/sin rows once.
  k::AttentionParams p;
  p.qkv = qkv;
  p.cu_seqlens = dcu;
  p.max_seqs = max_seqs;
  p.max_seqlen = 64;
  p.num_heads = heads;
  p.head_dim = head_dim;
  p.scale = scale;
  p.rotary_cos = cs;
  p.rotary_sin = cs;
  p.rotary_stride = head_dim / 2;
  p.out = out;
  p.stream = g_stream;
  std::vector<std::pair<std::string, std::function<void()>>> orders;
  auto add = [&](int per_block, const std::string& label) {
    k::AttentionParams forced = p;
    forced.rotary_heads_per_block = per_block;
    orders.emplace_back("fused into the loads, " + label,
                        [=] { BENCH_CHECK(k::run_attention(forced)); });
  };
  add(0, "heads a block picked (default)");
  for (int per_block = 1; per_block <= heads; per_block *= 2)
    if (heads % per_block == 0) add(per_block, std::to_string(per_block) + " heads a block");
  alternate("attn window + rotary", shape, flops, bytes, orders);
}

// One SigLIP so400m layer at 64 images of 729 patches, kernel by kernel, as
// the plugin runs it (LayerNorm, q/k/v, attention, out_proj + residual,
// LayerNorm, fc1 + GELU(tanh), fc2 + residual), then their sum against the
// square product's rate. fc1 also runs without its GELU, to price the epilogue.
void bench_siglip_layer(Pool& pool, cublasLtHandle_t lt, void* ws) {
  constexpr int64_t images = 64, len = 729, rows = images * len, D = 1152, I = 4304, H = 16;
  const size_t first = g_rows.size();
  bench_gemm(pool, lt, ws, "gemm square", 8192, 8192, 8192, Ep::None, false);
  const size_t layer_first = g_rows.size();
  bench_gemm(pool, lt, ws, "siglip qkv", rows, 3 * D, D, Ep::Bias, false);
  bench_gemm(pool, lt, ws, "siglip out+res", rows, D, D, Ep::Bias, true);
  bench_gemm(pool, lt, ws, "siglip fc1 gelu", rows, I, D, Ep::BiasGeluTanh, false);
  bench_gemm(pool, lt, ws, "siglip fc1 (no gelu)", rows, I, D, Ep::Bias, false);
  bench_gemm(pool, lt, ws, "siglip fc2+res", rows, D, I, Ep::Bias, true);
  bench_attention(pool, "siglip attn", rows, static_cast<int>(len), 0, static_cast<int>(H),
                  static_cast<int>(D / H));
  bf16* x = pool.bf(static_cast<size_t>(rows * D));
  bf16* y = pool.bf(static_cast<size_t>(rows * D));
  bf16* w = pool.bf(static_cast<size_t>(D));
  add_row("siglip layer_norm", std::to_string(rows) + "x1152",
          time_us([&] { BENCH_CHECK(k::layer_norm_bf16(x, w, w, y, rows, D, 1e-6f, g_stream)); }),
          0, 4.0 * rows * D);
  // The sum takes each kernel's best timed form (what a tuned plan runs).
  auto best = [&](const std::string& kernel) {
    double us = 1e30;
    for (size_t i = layer_first; i < g_rows.size(); ++i)
      if (g_rows[i].kernel == kernel && g_rows[i].note.rfind("own", 0) != 0)
        us = std::min(us, g_rows[i].us);
    return us;
  };
  double peak = 0.0;
  for (size_t i = first; i < layer_first; ++i) peak = std::max(peak, g_rows[i].tflops);
  const double products = best("siglip qkv") + best("siglip out+res") + best("siglip fc1 gelu") +
                          best("siglip fc2+res");
  const double attn = best("siglip attn"), norms = 2 * best("siglip layer_norm");
  const double layer = products + attn + norms;
  const double flops =
      2.0 * rows * D * (3 * D + D + 2 * I) + 4.0 * len * len * H * (D / H) * images;
  char note[200];
  std::snprintf(note, sizeof(note),
                "products %.0f%%, attention %.0f%%, norms %.0f%% of time; %.0f%% of square peak; "
                "%.0f images/s at 27 layers",
                100 * products / layer, 100 * attn / layer, 100 * norms / layer,
                100 * flops / layer * 1e-6 / std::max(peak, 1.0), images / (27 * layer * 1e-6));
  add_row("siglip layer", std::to_string(rows) + " tok, sum of best rows", layer, flops, 0.0, note);
}

}  // namespace

// A whole positive decimal number, else 0.
// One Linear in bf16 (GemmPlan, tuned) against FP8 (Fp8GemmPlan, tuned, on
// operands quantised beforehand), alternating; then the FP8 product with its
// activation quantisation (quantize_rows_e4m3) as the towers run it: with a
// residual, FP8's output apart, then added to the residual (fp8.hpp).
void bench_fp8(Pool& pool, cublasLtHandle_t lt, void* ws, const std::string& name, int64_t m,
               int64_t n, int64_t kk, bool residual) {
  const size_t wsb = k::GemmPlan::workspace_bytes();
  k::GemmPlan bf;
  BENCH_CHECK(bf.initialize(m, n, kk, Ep::Bias, residual));
  k::Fp8GemmPlan f8;
  BENCH_CHECK(f8.initialize(m, n, kk, Ep::Bias));
  bf16* A = pool.bf(static_cast<size_t>(m * kk));
  bf16* W = pool.bf(static_cast<size_t>(n * kk));
  bf16* bias = pool.bf(static_cast<size_t>(n));
  bf16* C = pool.bf(static_cast<size_t>(m * n));
  bf16* R = residual ? C : nullptr;                                     // bf16: in place
  bf16* R8 = residual ? pool.bf(static_cast<size_t>(m * n)) : nullptr;  // FP8: added after
  auto* Aq = pool.raw<k::e4m3>(static_cast<size_t>(m * kk));
  auto* Wq = pool.raw<k::e4m3>(static_cast<size_t>(n * kk));
  float* sa = pool.raw<float>(static_cast<size_t>(m));
  float* sw = pool.raw<float>(static_cast<size_t>(n));
  BENCH_CHECK(k::quantize_rows_e4m3(A, kk, Aq, sa, m, kk, -1.0f, g_stream));
  BENCH_CHECK(k::quantize_rows_e4m3(W, kk, Wq, sw, n, kk, -1.0f, g_stream));
  BENCH_CHECK(bf.tune(lt, A, W, bias, R, C, m, ws, wsb, g_stream, 16));
  BENCH_CHECK(f8.tune(lt, Aq, sa, Wq, sw, bias, C, m, ws, wsb, g_stream, 16));
  const double flops = 2.0 * m * n * kk;
  alternate(
      name, shape3(m, n, kk), flops, 0.0,
      {{"bf16 tuned", [&] { BENCH_CHECK(bf.run(lt, A, W, bias, R, C, m, ws, wsb, g_stream)); }},
       {"fp8 tuned (operands quantised)",
        [&] { BENCH_CHECK(f8.run(lt, Aq, sa, Wq, sw, bias, C, m, ws, wsb, g_stream)); }},
       {"fp8 + row quantisation", [&] {
          BENCH_CHECK(k::quantize_rows_e4m3(A, kk, Aq, sa, m, kk, -1.0f, g_stream));
          BENCH_CHECK(f8.run(lt, Aq, sa, Wq, sw, bias, C, m, ws, wsb, g_stream));
          if (residual) BENCH_CHECK(k::add_bf16(R8, C, R8, m * n, g_stream));
        }}});
}

// The activation quantisation kernels at the towers' widths: per row
// (Qwen2.5-VL's 1280 with its RMSNorm, SigLIP/Qwen3-VL's MLP 4304), centred
// with a LayerNorm (1152), and SiLU-mul of Qwen2.5-VL's blocked gate/up.
void bench_fp8_quantize(Pool& pool, int64_t m) {
  const std::string rows = std::to_string(m) + "x";
  for (const int64_t cols : {int64_t{1280}, int64_t{4304}}) {
    bf16* x = pool.bf(static_cast<size_t>(m * cols));
    auto* q = pool.raw<k::e4m3>(static_cast<size_t>(m * cols));
    float* sc = pool.raw<float>(static_cast<size_t>(m));
    add_row("quantize_rows", rows + std::to_string(cols), time_us([=] {
              BENCH_CHECK(k::quantize_rows_e4m3(x, cols, q, sc, m, cols, 1e-6f, g_stream));
            }),
            0.0, 3.0 * m * cols);
  }
  const int64_t d = 1152;
  bf16* x = pool.bf(static_cast<size_t>(m * d));
  auto* q = pool.raw<k::e4m3>(static_cast<size_t>(m * 4304));
  float* sc = pool.raw<float>(static_cast<size_t>(m));
  add_row("quantize_centred_rows", rows + std::to_string(d), time_us([=] {
            BENCH_CHECK(k::quantize_centred_rows_e4m3(x, d, q, sc, m, d, 1e-6f, g_stream));
          }),
          0.0, 3.0 * m * d);
  const int64_t inter = 3456;
  bf16* gu = pool.bf(static_cast<size_t>(m * 2 * inter));
  add_row("silu_mul_quantize", rows + std::to_string(inter),
          time_us([=] { BENCH_CHECK(k::silu_mul_quantize_e4m3(gu, q, sc, m, inter, g_stream)); }),
          0.0, 5.0 * m * inter);
}

int positive_int(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && v > 0 && v <= 1 << 20 ? static_cast<int>(v) : 0;
}

int main(int argc, char** argv) {
  std::string table_path;
  int64_t T = 65536;  // patches in the largest budget
  std::string only;   // one group of rows (device time is scarce), or all
  int attn_len = 0;   // --only attnshort: this length alone (for a profiler)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--table" && i + 1 < argc)
      table_path = argv[++i];
    else if (a == "--tokens" && i + 1 < argc)
      T = std::atoll(argv[++i]);
    else if (a == "--attn-len" && i + 1 < argc && (attn_len = positive_int(argv[i + 1])) > 0)
      ++i;
    else if (a == "--only" && i + 1 < argc &&
             (only = argv[++i], only == "gemm" || only == "attn" || only == "attnfull" ||
                                    only == "memory" || only == "mlp" || only == "small" ||
                                    only == "qkv" || only == "siglip" || only == "window" ||
                                    only == "attnshort" || only == "buckets" ||
                                    only == "mlpsmall" || only == "sam" || only == "fp8"))
      continue;
    else {
      std::fprintf(stderr,
                   "usage: bench_kernels [--table PATH] [--tokens N] [--only "
                   "gemm|small|attn|attnfull|attnshort|buckets|window|memory|mlp|mlpsmall|qkv|"
                   "siglip|sam|fp8] "
                   "[--attn-len N (with --only attnshort)]\n");
      return 2;
    }
  }
  if (attn_len > 0 && only != "attnshort") {
    std::fprintf(stderr, "bench_kernels: --attn-len %d needs --only attnshort\n", attn_len);
    return 2;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  BENCH_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  cublasLtHandle_t lt = nullptr;
  if (const cublasStatus_t st = cublasLtCreate(&lt); st != CUBLAS_STATUS_SUCCESS)
    BENCH_CHECK(k::kCublasErrorBase + static_cast<int>(st));
  auto want = [&](const char* group) { return only.empty() || only == group; };
  {
    Pool pool;
    void* ws = pool.raw<unsigned char>(k::GemmPlan::workspace_bytes());
    warm_card(pool, lt, ws, 3.0);

    // Ceilings: a large device copy and a large square product.
    if (want("gemm") || want("memory")) {
      const size_t n = size_t{1} << 30;  // bytes
      void* src = pool.raw<unsigned char>(n);
      void* dst = pool.raw<unsigned char>(n);
      BENCH_CUDA(cudaMemset(src, 0x3c, n));
      const double us = time_us(
          [&] { BENCH_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, g_stream)); });
      add_row("device copy", "1 GiB", us, 0.0, 2.0 * n, "bandwidth ceiling");
    }
    if (want("gemm")) {
      bench_gemm(pool, lt, ws, "gemm square", 8192, 8192, 8192, Ep::None, false);

      // The tower's products at the largest budget (per layer x32, merger once).
      bench_gemm(pool, lt, ws, "gemm patch_embed", T, 1280, 1176, Ep::None, false);
      bench_gemm(pool, lt, ws, "gemm qkv", T, 3840, 1280, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm o_proj+res", T, 1280, 1280, Ep::Bias, true);
      bench_gemm(pool, lt, ws, "gemm gate_up 3424", T, 2 * 3424, 1280, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm gate_up 3420", T, 2 * 3420, 1280, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm down 3424 +res", T, 1280, 3424, Ep::Bias, true);
      bench_gemm(pool, lt, ws, "gemm down 3420 +res", T, 1280, 3420, Ep::Bias, true);
      bench_gemm(pool, lt, ws, "gemm merger fc1 gelu", T / 4, 5120, 5120, Ep::BiasGelu, false);
      bench_gemm(pool, lt, ws, "gemm merger fc2", T / 4, 3584, 5120, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm qkv small", 4096, 3840, 1280, Ep::Bias, false);
    }
    // One 224² image: 256 patch rows (split-K candidates join the tuning
    // there); "--only small" runs these alone (for a profiler).
    if (want("gemm") || only == "small") {
      bench_gemm(pool, lt, ws, "gemm qkv 256", 256, 3840, 1280, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm o_proj+res 256", 256, 1280, 1280, Ep::Bias, true);
      bench_gemm(pool, lt, ws, "gemm gate_up 256", 256, 2 * 3456, 1280, Ep::Bias, false);
      bench_gemm(pool, lt, ws, "gemm down+res 256", 256, 1280, 3456, Ep::Bias, true);
    }

    // The MLP's first half: at the largest budget, a request of 16 images at
    // 224², one such image.
    if (want("mlp"))
      for (const int64_t m : {T, int64_t{16384}, int64_t{4096}, int64_t{1024}, int64_t{256}})
        bench_mlp(pool, lt, ws, m);
    // "--only mlpsmall": one image's rows against half of them (one row tile
    // of 128: half the tiles, each with the same k loop and operand bytes),
    // which tells a bound per multiprocessor (equal times) from one shared
    // by all of them, L2 or memory (half the time).
    if (only == "mlpsmall")
      for (const int64_t m : {int64_t{256}, int64_t{128}}) bench_mlp(pool, lt, ws, m);
    // norm1 and qkv, the same sizes ("--only qkv" alone).
    if (want("mlp") || only == "qkv")
      for (const int64_t m : {T, int64_t{16384}, int64_t{4096}, int64_t{1024}, int64_t{256}})
        bench_qkv(pool, lt, ws, m);

    // attnfull: one full-attention case alone (for a profiler).
    if (only == "attnfull") bench_attention(pool, "attn full", T, 4096, 0, 16, 80);
    // Attention: 8x8-patch windows, full attention per frame, SigLIP images.
    // "--only window": the window rows alone.
    if (want("attn") || only == "window") {
      bench_attention(pool, "attn window", T, 64, 0, 16, 80);
      bench_attention(pool, "attn window padded", T, 64, static_cast<int>(T / 64), 16, 80);
      // With as many empty window slots as the Qwen plugin's capture of that
      // size holds (plugins/qwen_vl/layout.cpp's cap.windows): none at the largest, 204
      // beside a 224² request of 16 images' 64 windows, 12 beside one image's 4.
      bench_window_rotary(pool, T, 16, 80, 0);
      bench_window_rotary(pool, 4096, 16, 80, 204);
      bench_window_rotary(pool, 256, 16, 80, 12);
    }
    // One small budget's full attention, as launched (--only buckets alone).
    if (want("attn") || only == "buckets") {
      bench_buckets(pool, "qwen2.5 one 224² image", 256, 16, {256}, 16, 80);
      bench_buckets(pool, "qwen3 one 224² image", 256, 64, {196}, 16, 72);
      bench_buckets(pool, "qwen2.5 four 224² images", 1024, 64, {256, 256, 256, 256}, 16, 80);
      bench_buckets(pool, "qwen3 two images", 1024, 128, {576, 196}, 16, 72);
    }
    if (want("attn")) {
      bench_attention(pool, "attn full", T, 1024, 0, 16, 80);
      bench_attention(pool, "attn full", T, 4096, 0, 16, 80);
      bench_attention(pool, "attn full", T, 16384, 0, 16, 80);
      bench_attention(pool, "attn siglip", 64 * 729, 729, 0, 16, 72);
      bench_attention(pool, "attn qwen3 1344", 8 * 7056, 7056, 0, 16, 72);
    }

    // "--only attnshort": SigLIP's head_dim at lengths around its 729, for
    // what a sequence's partial last tiles and its first tiles cost: 704
    // (whole key tiles, a half query block), 729, 768 (whole tiles and
    // blocks), then longer sequences over the same tokens.
    // --attn-len N runs that length alone (a profiler's target: e.g.
    // profile_kernel.sh ... tma_attention_kernel --only attnshort --attn-len 768).
    if (only == "attnshort")
      for (const int len :
           attn_len > 0 ? std::vector<int>{attn_len} : std::vector<int>{704, 729, 768, 1024, 2048})
        bench_attention(pool, "attn short", int64_t{64} * len, len, 0, 16, 72, true);

    // DeepSeek-OCR-2's SAM layers for a request of 8 A4 pages (a 1024² global
    // view and 768² local views each): global 64x64 and 48x48 grids, 14x14
    // windows (--only sam alone).
    if (want("attn") || only == "sam") {
      bench_sam(pool, "sam global 1024", 8, 64);
      bench_sam(pool, "sam global 768", 48, 48);
      bench_sam(pool, "sam windows", 200, 14);
    }
    // With --only sam, the SAM MLP's first product (768 -> 3072) over 8 global
    // views' 32768 tokens, with its erf GELU (a pass after cuBLASLt's product)
    // and without: the pass's price.
    if (only == "sam") {
      bench_gemm(pool, lt, ws, "sam mlp lin1 gelu", 8 * 4096, 3072, 768, Ep::BiasGelu, false);
      bench_gemm(pool, lt, ws, "sam mlp lin1 (no gelu)", 8 * 4096, 3072, 768, Ep::Bias, false);
    }

    // SigLIP so400m's layer at a 64-image budget (46656 rows of 1152, MLP
    // 4304, 16 heads of 72), and its sum: where siglip_bench's time goes.
    if (only == "siglip") bench_siglip_layer(pool, lt, ws);

    // "--only fp8": the Qwen2.5-VL block's four products in bf16 and FP8, at
    // the largest budget, a request of 16 224² images and one image.
    if (only == "fp8")
      for (const int64_t m : {T, int64_t{4096}, int64_t{256}}) {
        bench_fp8(pool, lt, ws, "linear qkv", m, 3840, 1280, false);
        bench_fp8(pool, lt, ws, "linear o_proj+res", m, 1280, 1280, true);
        bench_fp8(pool, lt, ws, "linear gate_up", m, 2 * 3456, 1280, false);
        bench_fp8(pool, lt, ws, "linear down+res", m, 1280, 3456, true);
        bench_fp8_quantize(pool, m);
      }

    // Memory-bound kernels.
    if (want("memory")) {
      const int64_t C = 1280, I = 3424, H = 16, D = 80;
      bf16* x = pool.bf(static_cast<size_t>(T * C));
      bf16* y = pool.bf(static_cast<size_t>(T * C));
      bf16* w = pool.bf(static_cast<size_t>(C));
      add_row("rms_norm", std::to_string(T) + "x1280",
              time_us([&] { BENCH_CHECK(k::rms_norm_bf16(x, w, y, T, C, 1e-6f, g_stream)); }), 0,
              4.0 * T * C);
      add_row("layer_norm", std::to_string(T) + "x1280",
              time_us([&] { BENCH_CHECK(k::layer_norm_bf16(x, w, w, y, T, C, 1e-6f, g_stream)); }),
              0, 4.0 * T * C);
      bf16* gu = pool.bf(static_cast<size_t>(T * 2 * I));
      bf16* act = pool.bf(static_cast<size_t>(T * I));
      add_row("silu_mul", std::to_string(T) + "x3424 from [gate|up]", time_us([&] {
                BENCH_CHECK(k::silu_mul_bf16(gu, 2 * I, gu + I, 2 * I, act, I, T, I, g_stream));
              }),
              0, 6.0 * T * I);
      bf16* qkv = pool.bf(static_cast<size_t>(T * 3 * H * D));
      float* cs = pool.raw<float>(static_cast<size_t>(T * D / 2));
      BENCH_CUDA(cudaMemset(cs, 0x3c, static_cast<size_t>(T * D / 2) * sizeof(float)));
      add_row("rotary", std::to_string(T) + " tok 16x80 q,k",
              time_us([&] { BENCH_CHECK(k::rotary_bf16(qkv, T, H, D, cs, cs, D / 2, g_stream)); }),
              0, 2.0 * 2 * T * 2 * H * D + 8.0 * T * D / 2);
      const int64_t rows = T / 4, cols = 4 * C;
      std::vector<int32_t> idx(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) idx[r] = static_cast<int32_t>((r * 7919) % rows);
      int32_t* didx = pool.raw<int32_t>(idx.size());
      BENCH_CUDA(
          cudaMemcpy(didx, idx.data(), idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      add_row("gather_rows", std::to_string(rows) + "x" + std::to_string(cols),
              time_us([&] { BENCH_CHECK(k::gather_rows_bf16(x, didx, y, rows, cols, g_stream)); }),
              0, 4.0 * rows * cols);
      add_row("gelu erf", std::to_string(T * C) + " values",
              time_us([&] { BENCH_CHECK(k::gelu_bf16(x, y, T * C, false, g_stream)); }), 0,
              4.0 * T * C);
      add_row("add", std::to_string(T * C) + " values",
              time_us([&] { BENCH_CHECK(k::add_bf16(x, y, y, T * C, g_stream)); }), 0, 6.0 * T * C);
    }
  }
  cublasLtDestroy(lt);
  cudaStreamDestroy(g_stream);

  // One encoder layer at this budget, summed from the rows above (default
  // untuned products, padded MLP): the share of the measured product peak.
  auto us_of = [](const std::string& kernel, const std::string& note_prefix) {
    for (const Row& r : g_rows)
      if (r.kernel == kernel && r.note.rfind(note_prefix, 0) == 0) return r.us;
    return 0.0;
  };
  const double gemm_us = us_of("gemm qkv", "heuristic") + us_of("gemm o_proj+res", "heuristic") +
                         us_of("gemm gate_up 3424", "heuristic") +
                         us_of("gemm down 3424 +res", "heuristic");
  const double other_us = 2 * us_of("rms_norm", "") + us_of("rotary", "") + us_of("silu_mul", "");
  const double gemm_flops = 2.0 * T * 1280 * (3840 + 1280 + 2 * 3424) + 2.0 * T * 3424 * 1280;
  const double window_flops = 4.0 * 64 * T * 1280;
  double attn_us = 0.0;
  for (const Row& r : g_rows)
    if (r.kernel == "attn window" && r.note == "default") {
      attn_us = r.us;
      break;
    }
  const double layer_us = gemm_us + other_us + attn_us;
  double peak = 0.0;  // the square product, best of heuristic and tuned
  for (const Row& r : g_rows)
    if (r.kernel == "gemm square") peak = std::max(peak, r.tflops);
  if (only.empty())  // the sum needs every group's rows
    add_row("layer (window attn)", std::to_string(T) + " tok, sum of rows", layer_us,
            gemm_flops + window_flops, 0.0,
            "products " + std::to_string(static_cast<int>(100 * gemm_us / layer_us)) +
                "% of time; " +
                std::to_string(static_cast<int>(100 * (gemm_flops + window_flops) / layer_us *
                                                1e-6 / std::max(peak, 1.0))) +
                "% of square-product peak");

  std::string table =
      "kernel                 shape                                   us   TFLOP/s     GB/s  "
      "note\n";
  for (const Row& r : g_rows) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-22s %-34s %9.1f %9.1f %8.0f  %s\n", r.kernel.c_str(),
                  r.shape.c_str(), r.us, r.tflops, r.gbs, r.note.c_str());
    table += line;
  }
  std::printf("\n== kernels (median of CUDA-event timings) ==\n%s", table.c_str());
  if (!table_path.empty()) {
    FILE* f = std::fopen(table_path.c_str(), "w");
    if (f == nullptr) {
      std::perror(table_path.c_str());
      return 1;
    }
    std::fprintf(f, "== kernels (median of CUDA-event timings) ==\n%s", table.c_str());
    std::fclose(f);
  }
  return 0;
}
