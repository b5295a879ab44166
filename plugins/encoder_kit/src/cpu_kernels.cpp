#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <cblas.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace encoder_kit::cpu {
namespace {
// Query rows per attention block: bounds the scores held at once to
// kQueryBlock x seqlen per thread.
constexpr int64_t kQueryBlock = 64;
// Floats per elementwise chunk: big enough that claiming a chunk is noise.
constexpr int64_t kElemGrain = 16384;

std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;

bool blas_threads_from_env() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* v = std::getenv(name); v && *v) return true;
  return false;
}

// Products run on the caller's thread while the pool is idle: give OpenBLAS
// the pool's count so together they use the cores once.
void match_blas_threads(int threads) {
  if (!blas_threads_from_env()) openblas_set_num_threads(threads);
}

// Rows per chunk for a row-wise pass over rows of `dim` floats.
int64_t row_grain(int64_t dim) {
  return std::max<int64_t>(1, kElemGrain / std::max<int64_t>(dim, 1));
}

template <typename Fn>
void for_rows(int64_t rows, int64_t dim, Fn&& fn) {
  pool().parallel_for(rows, row_grain(dim), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) fn(r);
  });
}

template <typename Fn>
void for_elems(size_t n, Fn&& fn) {
  pool().parallel_for(static_cast<int64_t>(n), kElemGrain, [&](int64_t b, int64_t e, int) {
    for (auto i = static_cast<size_t>(b); i < static_cast<size_t>(e); ++i) fn(i);
  });
}

// One attention block: nq query rows against len keys of one head. The
// products are done here rather than in BLAS so that pool tasks never call
// BLAS (see thread_pool.hpp) and each output's arithmetic is fixed by the
// block alone, not by a library's threading.
struct AttentionBlock {
  const float* q;  // [nq, hd], row stride ld_in
  const float* k;  // [len, hd], row stride ld_in
  const float* v;  // [len, hd], row stride ld_in
  float* out;      // [nq, hd], row stride ld_out
  int64_t ld_in, ld_out, nq, len, hd;
  float scale;
  float* scores;  // [nq, len]
};

void softmax_rows(const AttentionBlock& b) {
  for (int64_t i = 0; i < b.nq; ++i) {
    float* row = b.scores + i * b.len;
    const float m = *std::max_element(row, row + b.len);
    float sum = 0.0f;
    for (int64_t j = 0; j < b.len; ++j) {
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < b.len; ++j) row[j] *= inv;
  }
}

void attention_block_scalar(const AttentionBlock& b) {
  for (int64_t i = 0; i < b.nq; ++i)
    for (int64_t j = 0; j < b.len; ++j) {
      float dot = 0.0f;
      for (int64_t e = 0; e < b.hd; ++e) dot += b.q[i * b.ld_in + e] * b.k[j * b.ld_in + e];
      b.scores[i * b.len + j] = dot * b.scale;
    }
  softmax_rows(b);
  for (int64_t i = 0; i < b.nq; ++i) {
    float* o = b.out + i * b.ld_out;
    std::fill(o, o + b.hd, 0.0f);
    for (int64_t j = 0; j < b.len; ++j) {
      const float p = b.scores[i * b.len + j];
      for (int64_t e = 0; e < b.hd; ++e) o[e] += p * b.v[j * b.ld_in + e];
    }
  }
}

bool has_avx2_fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EK_AVX2 __attribute__((target("avx2,fma")))

// Lanes [0, n) of 8 set (n clamped to [0, 8]).
EK_AVX2 inline __m256i lane_mask(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))), idx);
}

EK_AVX2 inline float hsum(__m256 x) {
  const __m128 lo = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 h = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// Tiles of 4 queries x 4 keys (dot products along hd, 16 accumulators), then
// 4 queries x 16 outputs (8 accumulators) along the keys. Rows and keys past
// the end are clamped to the last valid one and their results dropped.
EK_AVX2 void attention_block_avx2(const AttentionBlock& b) {
  const int64_t hd = b.hd, full = hd / 8 * 8;
  const __m256i tail = lane_mask(hd - full);
  for (int64_t i0 = 0; i0 < b.nq; i0 += 4) {
    const float* qr[4];
    for (int r = 0; r < 4; ++r) qr[r] = b.q + std::min<int64_t>(i0 + r, b.nq - 1) * b.ld_in;
    for (int64_t j0 = 0; j0 < b.len; j0 += 4) {
      const float* kr[4];
      for (int c = 0; c < 4; ++c) kr[c] = b.k + std::min<int64_t>(j0 + c, b.len - 1) * b.ld_in;
      __m256 acc[4][4];
      for (auto& row : acc)
        for (auto& a : row) a = _mm256_setzero_ps();
      for (int64_t e = 0; e < hd; e += 8) {
        __m256 qv[4], kv[4];
        if (e < full) {
          for (int r = 0; r < 4; ++r) qv[r] = _mm256_loadu_ps(qr[r] + e);
          for (int c = 0; c < 4; ++c) kv[c] = _mm256_loadu_ps(kr[c] + e);
        } else {
          for (int r = 0; r < 4; ++r) qv[r] = _mm256_maskload_ps(qr[r] + e, tail);
          for (int c = 0; c < 4; ++c) kv[c] = _mm256_maskload_ps(kr[c] + e, tail);
        }
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(qv[r], kv[c], acc[r][c]);
      }
      for (int r = 0; r < 4 && i0 + r < b.nq; ++r)
        for (int c = 0; c < 4 && j0 + c < b.len; ++c)
          b.scores[(i0 + r) * b.len + j0 + c] = hsum(acc[r][c]) * b.scale;
    }
  }
  softmax_rows(b);
  for (int64_t i0 = 0; i0 < b.nq; i0 += 4) {
    const float* pr[4];
    for (int r = 0; r < 4; ++r) pr[r] = b.scores + std::min<int64_t>(i0 + r, b.nq - 1) * b.len;
    for (int64_t c0 = 0; c0 < hd; c0 += 16) {
      const __m256i m0 = lane_mask(hd - c0), m1 = lane_mask(hd - c0 - 8);
      __m256 acc[4][2];
      for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
      const float* vp = b.v + c0;
      for (int64_t j = 0; j < b.len; ++j, vp += b.ld_in) {
        const __m256 v0 = _mm256_maskload_ps(vp, m0), v1 = _mm256_maskload_ps(vp + 8, m1);
        for (int r = 0; r < 4; ++r) {
          const __m256 p = _mm256_broadcast_ss(pr[r] + j);
          acc[r][0] = _mm256_fmadd_ps(p, v0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(p, v1, acc[r][1]);
        }
      }
      for (int r = 0; r < 4 && i0 + r < b.nq; ++r) {
        float* o = b.out + (i0 + r) * b.ld_out + c0;
        _mm256_maskstore_ps(o, m0, acc[r][0]);
        _mm256_maskstore_ps(o + 8, m1, acc[r][1]);
      }
    }
  }
}
#else
void attention_block_avx2(const AttentionBlock& b) {
  attention_block_scalar(b);
}
#endif
}  // namespace

ThreadPool& pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) {
    g_pool = std::make_unique<ThreadPool>(default_cpu_threads());
    match_blas_threads(g_pool->size());
  }
  return *g_pool;
}

void set_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool.reset();  // joins the old workers first
  g_pool = std::make_unique<ThreadPool>(threads);
  match_blas_threads(g_pool->size());
}

void linear(const float* x, int64_t rows, int64_t in, const float* w, const float* bias,
            int64_t out, float* y, bool accumulate) {
  if (rows <= 0 || out <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
              static_cast<int>(out), static_cast<int>(in), 1.0f, x, static_cast<int>(in), w,
              static_cast<int>(in), accumulate ? 1.0f : 0.0f, y, static_cast<int>(out));
  if (!bias) return;
  for_rows(rows, out, [&](int64_t r) {
    float* row = y + r * out;
    for (int64_t c = 0; c < out; ++c) row[c] += bias[c];
  });
}

void rms_norm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* y) {
  for_rows(rows, dim, [&](int64_t r) {
    const float* in = x + r * dim;
    float* o = y + r * dim;
    double ss = 0.0;
    for (int64_t c = 0; c < dim; ++c) ss += static_cast<double>(in[c]) * in[c];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
    for (int64_t c = 0; c < dim; ++c) o[c] = in[c] * inv * weight[c];
  });
}

void layer_norm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps, float* y) {
  for_rows(rows, dim, [&](int64_t r) {
    const float* in = x + r * dim;
    float* o = y + r * dim;
    double mean = 0.0;
    for (int64_t c = 0; c < dim; ++c) mean += in[c];
    mean /= static_cast<double>(dim);
    double var = 0.0;
    for (int64_t c = 0; c < dim; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(dim);
    const float inv = 1.0f / std::sqrt(static_cast<float>(var) + eps);
    for (int64_t c = 0; c < dim; ++c)
      o[c] = (in[c] - static_cast<float>(mean)) * inv * weight[c] + (bias ? bias[c] : 0.0f);
  });
}

void gelu_erf(float* x, size_t n) {
  for_elems(n,
            [&](size_t i) { x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f)); });
}

void gelu_tanh(float* x, size_t n) {
  constexpr float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for_elems(n, [&](size_t i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  });
}

void silu(float* x, size_t n) {
  for_elems(n, [&](size_t i) { x[i] = x[i] / (1.0f + std::exp(-x[i])); });
}

void silu_mul(float* gate, const float* up, size_t n) {
  for_elems(n, [&](size_t i) { gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i]; });
}

void rotary_half(float* x, int64_t rows, int64_t ld, int64_t heads, int64_t head_dim,
                 const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for_rows(rows, heads * head_dim, [&](int64_t r) {
    const float* c = cos + r * half;
    const float* s = sin + r * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * ld + h * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * s[j];
        v[j + half] = b * c[j] + a * s[j];
      }
    }
  });
}

size_t attention_scratch_floats(int64_t max_seqlen) {
  return static_cast<size_t>(kQueryBlock) * static_cast<size_t>(std::max<int64_t>(max_seqlen, 1)) *
         static_cast<size_t>(pool().size());
}

void varlen_attention(const float* q, const float* k, const float* v, int64_t ld_in, float* out,
                      int64_t ld_out, const int32_t* cu_seqlens, int64_t num_seqs, int64_t heads,
                      int64_t head_dim, float scale, float* scratch, size_t scratch_floats) {
  ThreadPool& tp = pool();
  const size_t per_thread = scratch_floats / static_cast<size_t>(tp.size());
  // Work units are (sequence, head, query block); first[s] is sequence s's
  // first unit. Checked here, on the caller, so a bad size fails before any task runs.
  std::vector<int64_t> first(static_cast<size_t>(std::max<int64_t>(num_seqs, 0)) + 1, 0);
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t len = cu_seqlens[s + 1] - cu_seqlens[s];
    if (len > 0 && static_cast<size_t>(kQueryBlock * len) > per_thread)
      fail(EG_ERR_INTERNAL, "varlen_attention: sequence of " + std::to_string(len) +
                                " rows exceeds the scratch sized for " +
                                std::to_string(per_thread / kQueryBlock) + " rows on " +
                                std::to_string(tp.size()) + " threads");
    const int64_t blocks = len > 0 ? (len + kQueryBlock - 1) / kQueryBlock : 0;
    first[static_cast<size_t>(s) + 1] = first[static_cast<size_t>(s)] + heads * blocks;
  }
  const int64_t units = first.back();
  if (units == 0) return;
  const bool vec = has_avx2_fma();
  const int64_t grain = std::max<int64_t>(1, units / (static_cast<int64_t>(tp.size()) * 8));
  tp.parallel_for(units, grain, [&](int64_t ub, int64_t ue, int slot) {
    float* sc = scratch + static_cast<size_t>(slot) * per_thread;
    for (int64_t u = ub; u < ue; ++u) {
      const auto s = std::upper_bound(first.begin(), first.end(), u) - first.begin() - 1;
      const int64_t start = cu_seqlens[s], len = cu_seqlens[s + 1] - cu_seqlens[s];
      const int64_t blocks = (len + kQueryBlock - 1) / kQueryBlock;
      const int64_t h = (u - first[static_cast<size_t>(s)]) / blocks;
      const int64_t q0 = (u - first[static_cast<size_t>(s)]) % blocks * kQueryBlock;
      const int64_t nq = std::min(kQueryBlock, len - q0);
      const AttentionBlock b{q + (start + q0) * ld_in + h * head_dim,
                             k + start * ld_in + h * head_dim,
                             v + start * ld_in + h * head_dim,
                             out + (start + q0) * ld_out + h * head_dim,
                             ld_in,
                             ld_out,
                             nq,
                             len,
                             head_dim,
                             scale,
                             sc};
      if (vec)
        attention_block_avx2(b);
      else
        attention_block_scalar(b);
    }
  });
}

}  // namespace encoder_kit::cpu
