// The kit's attention with DeepSeek-OCR-2's extras (encoder_kit/cuda/
// attention.hpp, AttentionExtras), as the model calls it, against a float64 softmax(scale q.k +
// bias) v on fresh random inputs per case: the SAM's decomposed relative-position bias over hn x wn
// grids (14x14 windows, 48x48 and 64x64 global layers, odd wn, hn != wn, the largest table wn =
// 128, head dims 16..64), the encoder's grouped KV heads under the image/query prefix mask, and
// padded views (view_count): their rows keep a NaN poison, every real row is finite. q/k/v are
// column blocks of one row buffer as the model lays them out. Needs a GPU: the suite's main skips
// without one (fails when ENCGRAPH_REQUIRE_GPU=1).
#include "../encoder_kit_cuda/gpu_test_util.hpp"

#include <dsocr2_kernels.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace kc = dsocr2::cuda;
namespace ek = encoder_kit::cuda;
using encoder_kit_test::DeviceBuffer;
using encoder_kit_test::to_bf;
using encoder_kit_test::to_f;

// bf16 q/k/v, bf16 P for the PV product, bf16 bias products and a bf16
// output: about 1e-2 of relative L2 error against float64. A bias read one
// table row off gives errors near 1 (checked below for every bias case).
constexpr double kRelL2Limit = 2e-2;
// Largest single error, relative to the output's RMS: a few bf16 ulps of the
// logits in a sharp row (an emulation of the kernel's roundings peaks near
// 0.1 on 64x64), never a wrong key or a wrong bias entry (near 1 and above).
constexpr double kMaxErrLimit = 0.3;
// SAM's relative-position tables are ~N(0, 0.5^2) after training: q . rel
// then moves a logit by several units, so every wrong index shows.
constexpr float kRelStd = 0.5f;
constexpr uint16_t kPoisonBits = 0x7fc0;  // a bf16 quiet NaN

struct Problem {
  std::string name;
  int64_t num_seqs = 1;
  int heads = 1, group = 1, head_dim = 64;
  int seq_len = 0;
  int prefix = 0;
  int hn = 0, wn = 0;   // both > 0: the SAM bias over an hn x wn grid
  int view_count = -1;  // -1: no view_count (every sequence real)
  int seqs_per_view = 1;
  int out_pad = 0;  // out_stride = heads * head_dim + out_pad (columns never written)

  bool bias() const { return hn > 0; }
  int kv_heads() const { return heads / group; }
  // [q heads | k heads | v heads]: with group 1 the SAM's qkv projection [q | k | v].
  int64_t row_stride() const { return int64_t{heads + 2 * kv_heads()} * head_dim; }
  int64_t rows() const { return num_seqs * seq_len; }
  int64_t real_seqs() const {
    return view_count < 0 ? num_seqs
                          : std::min<int64_t>(num_seqs, int64_t{view_count} * seqs_per_view);
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }
};

// 2n - 1 rows of a relative-position table, padded with zero rows to a multiple of 8.
int table_rows(int n) {
  return (2 * n - 1 + 7) / 8 * 8;
}

struct HostInputs {
  std::vector<kc::bf16> qkv, rel_h, rel_w;
  std::vector<double> x, rh, rw;  // the same values in float64
};

std::vector<double> widen(const std::vector<kc::bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = to_f(v[i]);
  return d;
}

HostInputs make_inputs(const Problem& p, std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostInputs in;
  in.qkv.resize(static_cast<size_t>(p.rows() * p.row_stride()));
  for (auto& e : in.qkv) e = to_bf(normal(gen));
  if (p.bias()) {
    auto table = [&](int n) {
      std::vector<kc::bf16> t(static_cast<size_t>(table_rows(n)) * p.head_dim, to_bf(0.0f));
      for (size_t i = 0; i < static_cast<size_t>(2 * n - 1) * p.head_dim; ++i)
        t[i] = to_bf(kRelStd * normal(gen));
      return t;
    };
    in.rel_h = table(p.hn);
    in.rel_w = table(p.wn);
  }
  in.x = widen(in.qkv);
  in.rh = widen(in.rel_h);
  in.rw = widen(in.rel_w);
  return in;
}

double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// float64 attention of sequence s, head h: out [seq_len, head_dim]. The bias
// reads rel_w `w_shift` rows off its true index (0 for the reference; 1 for
// the self-check that a misplaced P_w index would fail the tolerance).
void reference(const Problem& p, const HostInputs& in, int64_t s, int h, int w_shift,
               std::vector<double>& out) {
  const int len = p.seq_len, hd = p.head_dim;
  const int64_t stride = p.row_stride();
  const int64_t q_off = int64_t{h} * hd;
  const int64_t k_off = int64_t{p.heads + h / p.group} * hd;
  const int64_t v_off = int64_t{p.heads + p.kv_heads() + h / p.group} * hd;
  const double scale = p.scale();
  const double* base = in.x.data() + s * len * stride;
  std::vector<double> ph, pw, logit(static_cast<size_t>(len));
  if (p.bias()) {
    ph.resize(static_cast<size_t>(2 * p.hn - 1));
    pw.resize(static_cast<size_t>(2 * p.wn - 1));
  }
  out.assign(static_cast<size_t>(len) * hd, 0.0);
  for (int i = 0; i < len; ++i) {
    const double* q = base + i * stride + q_off;
    const int limit = p.prefix > 0 ? (i < p.prefix ? p.prefix : i + 1) : len;
    int qy = 0, qx = 0;
    if (p.bias()) {
      for (size_t r = 0; r < ph.size(); ++r) ph[r] = dot(q, &in.rh[r * hd], hd);
      for (size_t r = 0; r < pw.size(); ++r) {
        const size_t rs = r + static_cast<size_t>(w_shift);
        pw[r] = rs < pw.size() ? dot(q, &in.rw[rs * hd], hd) : 0.0;
      }
      qy = i / p.wn;
      qx = i % p.wn;
    }
    double mx = -INFINITY;
    for (int j = 0; j < limit; ++j) {
      double l = scale * dot(q, base + j * stride + k_off, hd);
      if (p.bias()) {
        const int ky = j / p.wn, kx = j % p.wn;
        l += ph[static_cast<size_t>(qy - ky + p.hn - 1)] +
             pw[static_cast<size_t>(qx - kx + p.wn - 1)];
      }
      logit[static_cast<size_t>(j)] = l;
      mx = std::max(mx, l);
    }
    double sum = 0.0;
    double* o = &out[static_cast<size_t>(i) * hd];
    for (int j = 0; j < limit; ++j) {
      const double e = std::exp(logit[static_cast<size_t>(j)] - mx);
      sum += e;
      const double* v = base + j * stride + v_off;
      for (int d = 0; d < hd; ++d) o[d] += e * v[d];
    }
    for (int d = 0; d < hd; ++d) o[d] /= sum;
  }
}

// f(0) .. f(n - 1) over the machine's cores (the 64x64 reference is ~4 GFLOP).
template <typename F>
void parallel_for(size_t n, F f) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) f(i);
    });
  for (auto& th : pool) th.join();
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double d2 = 0.0, w2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    d2 += (got[i] - want[i]) * (got[i] - want[i]);
    w2 += want[i] * want[i];
  }
  return std::sqrt(d2 / std::max(w2, 1e-300));
}

bool is_poison(kc::bf16 v) {
  return static_cast<__nv_bfloat16_raw>(v).x == kPoisonBits;
}

void run(const Problem& p) {
  const unsigned seed = std::random_device{}();
  std::mt19937 gen(seed);
  CAPTURE(p.name);
  CAPTURE(seed);
  const HostInputs in = make_inputs(p, gen);
  const int64_t width = int64_t{p.heads} * p.head_dim;
  const int64_t out_stride = width + p.out_pad;
  const int64_t kv_width = int64_t{p.kv_heads()} * p.head_dim;

  DeviceBuffer<kc::bf16> d_qkv(in.qkv.size());
  DeviceBuffer<kc::bf16> d_out(static_cast<size_t>(p.rows() * out_stride));
  DeviceBuffer<kc::bf16> d_rel_h(in.rel_h.size()), d_rel_w(in.rel_w.size());
  DeviceBuffer<int32_t> d_views(1);
  d_qkv.upload(in.qkv);
  __nv_bfloat16_raw raw;
  raw.x = kPoisonBits;
  const kc::bf16 poison(raw);
  d_out.upload(std::vector<kc::bf16>(d_out.size(), poison));

  ek::AttentionExtras a;
  a.q = d_qkv.get();
  a.k = d_qkv.get() + width;
  a.v = d_qkv.get() + width + kv_width;
  a.q_stride = a.kv_stride = p.row_stride();
  a.out_stride = out_stride;
  a.kv_heads = p.kv_heads();
  a.prefix = p.prefix;
  if (p.bias()) {
    d_rel_h.upload(in.rel_h);
    d_rel_w.upload(in.rel_w);
    a.rel_h = d_rel_h.get();
    a.rel_w = d_rel_w.get();
    a.hn = p.hn;
    a.wn = p.wn;
  }
  if (p.view_count >= 0) {
    d_views.upload(std::vector<int32_t>{p.view_count});
    a.view_count = d_views.get();
    a.seqs_per_view = p.seqs_per_view;
  }
  ek::AttentionParams ap;
  ap.max_seqs = static_cast<int>(p.num_seqs);
  ap.max_seqlen = p.seq_len;
  ap.num_heads = p.heads;
  ap.head_dim = p.head_dim;
  ap.scale = p.scale();
  ap.out = d_out.get();
  ap.extras = &a;
  CHECK_OK(ek::run_attention(ap));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<kc::bf16> out = d_out.download();

  // Padded sequences untouched; real rows finite and their pad columns untouched.
  const int64_t real = p.real_seqs();
  const int64_t real_rows = real * p.seq_len;
  size_t nonfinite = 0, written_pad = 0;
  for (int64_t r = 0; r < p.rows(); ++r)
    for (int64_t c = 0; c < out_stride; ++c) {
      const kc::bf16 v = out[static_cast<size_t>(r * out_stride + c)];
      if (r >= real_rows || c >= width)
        written_pad += is_poison(v) ? 0 : 1;
      else
        nonfinite += std::isfinite(to_f(v)) ? 0 : 1;
    }
  CHECK(nonfinite == 0);
  CHECK(written_pad == 0);
  if (real == 0) {
    MESSAGE(p.name << ": no real sequence, " << p.rows() << " rows left poisoned");
    return;
  }

  // The reference per (sequence, head), plus, with the bias, sequence 0 head 0
  // with P_w one row off.
  const size_t tasks = static_cast<size_t>(real) * p.heads;
  std::vector<std::vector<double>> ref(tasks);
  std::vector<double> shifted;
  parallel_for(tasks + (p.bias() ? 1 : 0), [&](size_t t) {
    if (t == tasks)
      reference(p, in, 0, 0, 1, shifted);
    else
      reference(p, in, static_cast<int64_t>(t) / p.heads, static_cast<int>(t % p.heads), 0, ref[t]);
  });

  std::vector<double> want, got;
  want.reserve(static_cast<size_t>(real_rows * width));
  got.reserve(want.capacity());
  for (int64_t s = 0; s < real; ++s)
    for (int64_t i = 0; i < p.seq_len; ++i)
      for (int h = 0; h < p.heads; ++h)
        for (int d = 0; d < p.head_dim; ++d) {
          want.push_back(
              ref[static_cast<size_t>(s * p.heads + h)][static_cast<size_t>(i * p.head_dim + d)]);
          got.push_back(to_f(out[static_cast<size_t>((s * p.seq_len + i) * out_stride +
                                                     int64_t{h} * p.head_dim + d)]));
        }
  double max_err = 0.0, sq = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_err = std::max(max_err, std::fabs(got[i] - want[i]));
    sq += want[i] * want[i];
  }
  const double rms = std::sqrt(sq / static_cast<double>(want.size()));
  const double err = rel_l2(got, want);
  std::string self_check;
  if (p.bias()) {
    const double off = rel_l2(shifted, ref[0]);
    self_check = ", P_w one row off: " + std::to_string(off);
    // The tolerance must reject a misplaced bias index.
    CHECK_MESSAGE(off > 10 * kRelL2Limit,
                  "reference with rel_w shifted by a row differs by only " << off);
  }
  MESSAGE(p.name << ": rel L2 " << err << ", max abs err " << max_err << " (output RMS " << rms
                 << ")" << self_check);
  CHECK(err < kRelL2Limit);
  CHECK(max_err < kMaxErrLimit * rms);
}

Problem sam(std::string name, int64_t seqs, int heads, int head_dim, int hn, int wn) {
  Problem p;
  p.name = std::move(name);
  p.num_seqs = seqs;
  p.heads = heads;
  p.head_dim = head_dim;
  p.hn = hn;
  p.wn = wn;
  p.seq_len = hn * wn;
  return p;
}

// The encoder: 14 query heads over 2 KV heads of 64, n image rows then n query rows.
Problem encoder(std::string name, int64_t seqs, int n) {
  Problem p;
  p.name = std::move(name);
  p.num_seqs = seqs;
  p.heads = 14;
  p.group = 7;
  p.head_dim = 64;
  p.seq_len = 2 * n;
  p.prefix = n;
  return p;
}

}  // namespace

TEST_CASE("kit attention, DeepSeek extras: SAM 14x14 windows, 12 heads of 64, padded views") {
  // 3 views of 2 windows, view_count 2: the last view's windows stay poisoned.
  Problem p = sam("14x14 windows", 6, 12, 64, 14, 14);
  p.view_count = 2;
  p.seqs_per_view = 2;
  run(p);
}

TEST_CASE("kit attention, DeepSeek extras: SAM global layers 48x48 and 64x64") {
  Problem p = sam("48x48 global", 2, 2, 64, 48, 48);
  p.view_count = 1;  // the second view is padding
  run(p);
  run(sam("64x64 global", 1, 2, 64, 64, 64));
}

TEST_CASE("kit attention, DeepSeek extras: SAM odd wn (unpaired keys)") {
  run(sam("7x7", 3, 4, 64, 7, 7));
  run(sam("15x15 head_dim 32", 2, 3, 32, 15, 15));
  run(sam("10x7 head_dim 16", 3, 2, 16, 10, 7));
  run(sam("9x9 head_dim 40", 2, 2, 40, 9, 9));
  run(sam("127x3 (tall table) head_dim 32", 1, 1, 32, 127, 3));
}

TEST_CASE("kit attention, DeepSeek extras: SAM hn != wn, even wn (paired keys)") {
  run(sam("4x16 head_dim 40", 2, 2, 40, 4, 16));
  run(sam("7x10 head_dim 16", 3, 2, 16, 7, 10));
  run(sam("16x4 head_dim 64", 2, 3, 64, 16, 4));
  run(sam("2x128 (widest table) head_dim 32", 2, 1, 32, 2, 128));
}

TEST_CASE("kit attention, DeepSeek extras: encoder prefix mask, grouped KV heads") {
  // [q heads | k heads | v heads] rows; out rows wider than the heads (pad
  // columns must stay poisoned); view_count 2 of 3 sequences.
  Problem p = encoder("encoder n=144", 3, 144);
  p.view_count = 2;
  p.out_pad = 8;
  run(p);
  Problem q = encoder("encoder n=256", 2, 256);
  q.view_count = 2;  // every view real
  run(q);
}

TEST_CASE("kit attention, DeepSeek extras: view_count 0 writes nothing") {
  Problem p = sam("7x7, no real view", 4, 2, 32, 7, 7);
  p.view_count = 0;
  p.seqs_per_view = 2;
  run(p);
  Problem q = encoder("encoder, no real view", 2, 144);
  q.view_count = 0;
  run(q);
}
