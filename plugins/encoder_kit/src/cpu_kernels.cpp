#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <cblas.h>

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

std::mutex g_blas_mutex;
int g_serial_depth = 0;
int g_saved_blas_threads = 1;

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

SerialBlas::SerialBlas() {
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (g_serial_depth++ == 0) {
    g_saved_blas_threads = openblas_get_num_threads();
    if (g_saved_blas_threads != 1) openblas_set_num_threads(1);
  }
}

SerialBlas::~SerialBlas() {
  std::lock_guard<std::mutex> lock(g_blas_mutex);
  if (--g_serial_depth == 0 && g_saved_blas_threads != 1)
    openblas_set_num_threads(g_saved_blas_threads);
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
  // The products inside the tasks stay on their task's thread.
  SerialBlas serial;
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
      const float* kh = k + start * ld_in + h * head_dim;
      const float* vh = v + start * ld_in + h * head_dim;
      const float* qh = q + (start + q0) * ld_in + h * head_dim;
      float* oh = out + (start + q0) * ld_out + h * head_dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq),
                  static_cast<int>(len), static_cast<int>(head_dim), scale, qh,
                  static_cast<int>(ld_in), kh, static_cast<int>(ld_in), 0.0f, sc,
                  static_cast<int>(len));
      for (int64_t i = 0; i < nq; ++i) {
        float* row = sc + i * len;
        const float m = *std::max_element(row, row + len);
        float sum = 0.0f;
        for (int64_t j = 0; j < len; ++j) {
          row[j] = std::exp(row[j] - m);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < len; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq),
                  static_cast<int>(head_dim), static_cast<int>(len), 1.0f, sc,
                  static_cast<int>(len), vh, static_cast<int>(ld_in), 0.0f, oh,
                  static_cast<int>(ld_out));
    }
  });
}

}  // namespace encoder_kit::cpu
