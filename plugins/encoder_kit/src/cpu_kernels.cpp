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

// Attention of one unit: queries [q0, q0 + nq) of one head of one sequence
// against its len keys. The products are done here rather than in BLAS so
// that pool tasks never call BLAS (see thread_pool.hpp) and each output's
// arithmetic is fixed by its sequence alone, not by a library's threading.
constexpr int64_t kUnitRows = 8 * kQueryBlock;  // queries per unit: K, V packed once for them

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// Row stride of the scores and transposed keys: len rounded up to 16, and
// off a multiple of 128 floats so rows do not alias in the L1 cache.
int64_t key_stride(int64_t len) {
  const int64_t s = round_up(std::max<int64_t>(len, 1), 16);
  return s % 128 == 0 ? s + 16 : s;
}

// Per-thread scratch: scores [kQueryBlock, lds], keys transposed [hd, lds],
// values [lds, hdp] (hdp: hd rounded up to 16); the padding zero.
size_t unit_scratch_floats(int64_t len, int64_t hd) {
  const int64_t lds = key_stride(len), hdp = round_up(hd, 16);
  return static_cast<size_t>(kQueryBlock * lds + hd * lds + lds * hdp);
}

struct AttentionUnit {
  const float* q;  // [nq, hd], row stride ld_in
  const float* k;  // [len, hd], row stride ld_in
  const float* v;  // [len, hd], row stride ld_in
  float* out;      // [nq, hd], row stride ld_out
  int64_t ld_in, ld_out, nq, len, hd;
  float scale;
  float* scratch;  // unit_scratch_floats(len, hd)
};

// Softmax of rows [0, nq) of scores (row stride lenp) over their first len entries.
void softmax_rows(float* scores, int64_t nq, int64_t len, int64_t lenp) {
  for (int64_t i = 0; i < nq; ++i) {
    float* row = scores + i * lenp;
    const float m = *std::max_element(row, row + len);
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      row[j] = std::exp(row[j] - m);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < len; ++j) row[j] *= inv;
  }
}

void attention_unit_scalar(const AttentionUnit& u) {
  float* scores = u.scratch;
  for (int64_t b0 = 0; b0 < u.nq; b0 += kQueryBlock) {
    const int64_t nq = std::min(kQueryBlock, u.nq - b0);
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < u.len; ++j) {
        float dot = 0.0f;
        for (int64_t e = 0; e < u.hd; ++e)
          dot += u.q[(b0 + i) * u.ld_in + e] * u.k[j * u.ld_in + e];
        scores[i * u.len + j] = dot * u.scale;
      }
    softmax_rows(scores, nq, u.len, u.len);
    for (int64_t i = 0; i < nq; ++i) {
      float* o = u.out + (b0 + i) * u.ld_out;
      std::fill(o, o + u.hd, 0.0f);
      for (int64_t j = 0; j < u.len; ++j) {
        const float p = scores[i * u.len + j];
        for (int64_t e = 0; e < u.hd; ++e) o[e] += p * u.v[j * u.ld_in + e];
      }
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

// e^x for x <= 0 (softmax inputs after the max is taken off): Cephes' expf
// polynomial, about 1 ulp; x below -87 gives 0 or a tiny number.
EK_AVX2 inline __m256 exp_neg(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

EK_AVX2 inline float hmax(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

EK_AVX2 inline float hsum(__m256 x) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

// softmax_rows in 8 lanes; a row's entries [len, round_up(len, 8)) (inside
// its stride) are written but not counted.
EK_AVX2 void softmax_rows_avx2(float* scores, int64_t nq, int64_t len, int64_t lds) {
  const int64_t len8 = round_up(len, 8);
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 tail = _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(len - (len8 - 8))), idx));
  for (int64_t i = 0; i < nq; ++i) {
    float* row = scores + i * lds;
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j + 8 < len8; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + j));
    m = _mm256_max_ps(
        m, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(row + len8 - 8), tail));
    const __m256 mx = _mm256_set1_ps(hmax(m));
    __m256 sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < len8; j += 8) {
      __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(row + j), mx));
      if (j + 8 == len8) e = _mm256_and_ps(e, tail);
      _mm256_storeu_ps(row + j, e);
      sum = _mm256_add_ps(sum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
    for (int64_t j = 0; j < len8; j += 8)
      _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
  }
}

// out[6][16] = sum over t < n of a[r][t] * b[t * ldb + 0..15], in t order: the
// micro-kernel of both attention products (12 accumulators in registers).
EK_AVX2 inline void tile_6x16(const float* const a[6], const float* b, int64_t ldb, int64_t n,
                              __m256 out[12]) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (int64_t t = 0; t < n; ++t, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a0 + t);
    c00 = _mm256_fmadd_ps(x, b0, c00);
    c01 = _mm256_fmadd_ps(x, b1, c01);
    x = _mm256_broadcast_ss(a1 + t);
    c10 = _mm256_fmadd_ps(x, b0, c10);
    c11 = _mm256_fmadd_ps(x, b1, c11);
    x = _mm256_broadcast_ss(a2 + t);
    c20 = _mm256_fmadd_ps(x, b0, c20);
    c21 = _mm256_fmadd_ps(x, b1, c21);
    x = _mm256_broadcast_ss(a3 + t);
    c30 = _mm256_fmadd_ps(x, b0, c30);
    c31 = _mm256_fmadd_ps(x, b1, c31);
    x = _mm256_broadcast_ss(a4 + t);
    c40 = _mm256_fmadd_ps(x, b0, c40);
    c41 = _mm256_fmadd_ps(x, b1, c41);
    x = _mm256_broadcast_ss(a5 + t);
    c50 = _mm256_fmadd_ps(x, b0, c50);
    c51 = _mm256_fmadd_ps(x, b1, c51);
  }
  out[0] = c00, out[1] = c01, out[2] = c10, out[3] = c11, out[4] = c20, out[5] = c21;
  out[6] = c30, out[7] = c31, out[8] = c40, out[9] = c41, out[10] = c50, out[11] = c51;
}

// Both products in tiles of 6 rows x 16 columns: scores = q kT over hd,
// out = p v over the keys. Rows past the block's end are clamped to its
// last row and their results dropped.
EK_AVX2 void attention_unit_avx2(const AttentionUnit& u) {
  const int64_t len = u.len, hd = u.hd, lds = key_stride(len), hdp = round_up(hd, 16);
  float* scores = u.scratch;               // [kQueryBlock, lds]
  float* kt = scores + kQueryBlock * lds;  // [hd, lds]
  float* vp = kt + hd * lds;               // [lds, hdp]
  // Pack the head's keys transposed, 8 keys at a time so that each write
  // fills part of a line, and its values with rows padded to hdp.
  for (int64_t j0 = 0; j0 < lds; j0 += 8) {
    const float* kr[8];
    for (int c = 0; c < 8; ++c) kr[c] = j0 + c < len ? u.k + (j0 + c) * u.ld_in : nullptr;
    for (int64_t e = 0; e < hd; ++e)
      for (int c = 0; c < 8; ++c) kt[e * lds + j0 + c] = kr[c] ? kr[c][e] : 0.0f;
  }
  for (int64_t j = 0; j < len; ++j) {
    std::copy(u.v + j * u.ld_in, u.v + j * u.ld_in + hd, vp + j * hdp);
    std::fill(vp + j * hdp + hd, vp + (j + 1) * hdp, 0.0f);
  }
  const __m256 scale = _mm256_set1_ps(u.scale);
  __m256 acc[12];
  for (int64_t b0 = 0; b0 < u.nq; b0 += kQueryBlock) {
    const int64_t nq = std::min(kQueryBlock, u.nq - b0);
    // Keys outer: a 16-key slice of kt (hd lines) stays in L1 for all rows.
    for (int64_t j0 = 0; j0 < lds; j0 += 16)
      for (int64_t i0 = 0; i0 < nq; i0 += 6) {
        const float* qr[6];
        for (int r = 0; r < 6; ++r)
          qr[r] = u.q + (b0 + std::min<int64_t>(i0 + r, nq - 1)) * u.ld_in;
        tile_6x16(qr, kt + j0, lds, hd, acc);
        for (int r = 0; r < 6 && i0 + r < nq; ++r) {
          _mm256_storeu_ps(scores + (i0 + r) * lds + j0, _mm256_mul_ps(acc[2 * r], scale));
          _mm256_storeu_ps(scores + (i0 + r) * lds + j0 + 8, _mm256_mul_ps(acc[2 * r + 1], scale));
        }
      }
    softmax_rows_avx2(scores, nq, len, lds);
    for (int64_t i0 = 0; i0 < nq; i0 += 6) {
      const float* pr[6];
      for (int r = 0; r < 6; ++r) pr[r] = scores + std::min<int64_t>(i0 + r, nq - 1) * lds;
      for (int64_t c0 = 0; c0 < hdp; c0 += 16) {
        tile_6x16(pr, vp + c0, hdp, len, acc);
        const int64_t w = std::min<int64_t>(16, hd - c0);
        for (int r = 0; r < 6 && i0 + r < nq; ++r) {
          float* o = u.out + (b0 + i0 + r) * u.ld_out + c0;
          if (w == 16) {
            _mm256_storeu_ps(o, acc[2 * r]);
            _mm256_storeu_ps(o + 8, acc[2 * r + 1]);
          } else {
            alignas(32) float tmp[16];
            _mm256_store_ps(tmp, acc[2 * r]);
            _mm256_store_ps(tmp + 8, acc[2 * r + 1]);
            std::copy(tmp, tmp + w, o);
          }
        }
      }
    }
  }
}
#else
void attention_unit_avx2(const AttentionUnit& u) {
  attention_unit_scalar(u);
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

size_t attention_scratch_floats(int64_t max_seqlen, int64_t head_dim) {
  return unit_scratch_floats(max_seqlen, std::max<int64_t>(head_dim, 1)) *
         static_cast<size_t>(pool().size());
}

void varlen_attention(const float* q, const float* k, const float* v, int64_t ld_in, float* out,
                      int64_t ld_out, const int32_t* cu_seqlens, int64_t num_seqs, int64_t heads,
                      int64_t head_dim, float scale, float* scratch, size_t scratch_floats) {
  ThreadPool& tp = pool();
  const size_t per_thread = scratch_floats / static_cast<size_t>(tp.size());
  // Work units are (sequence, head, up to kUnitRows queries); first[s] is
  // sequence s's first unit. Checked here, on the caller, so a bad size
  // fails before any task runs.
  std::vector<int64_t> first(static_cast<size_t>(std::max<int64_t>(num_seqs, 0)) + 1, 0);
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t len = cu_seqlens[s + 1] - cu_seqlens[s];
    if (len > 0 && unit_scratch_floats(len, head_dim) > per_thread)
      fail(EG_ERR_INTERNAL,
           "varlen_attention: a sequence of " + std::to_string(len) + " rows needs " +
               std::to_string(unit_scratch_floats(len, head_dim)) +
               " floats of scratch per thread; it has " + std::to_string(per_thread) + " on " +
               std::to_string(tp.size()) + " threads (size it with attention_scratch_floats)");
    const int64_t parts = len > 0 ? (len + kUnitRows - 1) / kUnitRows : 0;
    first[static_cast<size_t>(s) + 1] = first[static_cast<size_t>(s)] + heads * parts;
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
      const int64_t parts = (len + kUnitRows - 1) / kUnitRows;
      const int64_t h = (u - first[static_cast<size_t>(s)]) / parts;
      const int64_t q0 = (u - first[static_cast<size_t>(s)]) % parts * kUnitRows;
      const AttentionUnit unit{q + (start + q0) * ld_in + h * head_dim,
                               k + start * ld_in + h * head_dim,
                               v + start * ld_in + h * head_dim,
                               out + (start + q0) * ld_out + h * head_dim,
                               ld_in,
                               ld_out,
                               std::min(kUnitRows, len - q0),
                               len,
                               head_dim,
                               scale,
                               sc};
      if (vec)
        attention_unit_avx2(unit);
      else
        attention_unit_scalar(unit);
    }
  });
}

}  // namespace encoder_kit::cpu
