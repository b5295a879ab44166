// fp32 CPU kernels the plugins' CPU path (CI and reference) is built from.
// Matrix products go through BLAS (cblas_sgemm); the other passes run on the
// process's one ThreadPool (cpu::pool()), split by rows, sequences and heads.
// Every output element is computed by one task with the same arithmetic
// whatever the thread count, so results do not depend on it.
// Layouts are row-major; a Linear weight is [out, in] as in torch.nn.Linear.
#pragma once

#include <encoder_kit/thread_pool.hpp>

#include <cstddef>
#include <cstdint>

namespace encoder_kit::cpu {

// The process's pool, started on first use with default_cpu_threads(). On
// start it sets OpenBLAS to the same thread count unless OPENBLAS_NUM_THREADS,
// GOTO_NUM_THREADS or OMP_NUM_THREADS says otherwise.
ThreadPool& pool();

// Replaces the pool by one of `threads` threads (tests and benchmarks; no
// kernel may be running). Workspaces sized by attention_scratch_floats before
// the change may then be too small: varlen_attention fails on them.
void set_threads(int threads);

// y[rows, out] = x[rows, in] * w^T + bias (bias may be null). With
// `accumulate`, the product is added to y instead (a fused residual add).
void linear(const float* x, int64_t rows, int64_t in, const float* w, const float* bias,
            int64_t out, float* y, bool accumulate = false);

// y = x / sqrt(mean(x^2) + eps) * weight, per row.
void rms_norm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* y);

// y = (x - mean) / sqrt(var + eps) * weight + bias, per row.
void layer_norm(const float* x, int64_t rows, int64_t dim, const float* weight, const float* bias,
                float eps, float* y);

void gelu_erf(float* x, size_t n);   // exact GELU (torch.nn.GELU())
void gelu_tanh(float* x, size_t n);  // GELU(approximate="tanh")
void silu(float* x, size_t n);
void silu_mul(float* gate, const float* up, size_t n);  // gate = silu(gate) * up

// Rotate-half rotary embedding, in place, on `heads` heads of `head_dim`
// values at the start of each row (row stride `ld`): for j < head_dim/2,
//   (x_j, x_{j+h}) <- (x_j c_j - x_{j+h} s_j, x_{j+h} c_j + x_j s_j)
// with c, s the row's entries of cos/sin ([rows, head_dim/2]).
void rotary_half(float* x, int64_t rows, int64_t ld, int64_t heads, int64_t head_dim,
                 const float* cos, const float* sin);

// Floats of scratch varlen_attention needs for sequences up to max_seqlen
// with heads of head_dim: per pool thread, a block of scores and the head's
// keys and values packed; so it scales with pool().size().
size_t attention_scratch_floats(int64_t max_seqlen, int64_t head_dim);

// Non-causal attention within each sequence [cu[s], cu[s+1]) for s < num_seqs
// (empty sequences are skipped; rows outside every sequence are not written).
// q, k, v: [rows, heads*head_dim] with row stride ld_in; out: stride ld_out.
void varlen_attention(const float* q, const float* k, const float* v, int64_t ld_in, float* out,
                      int64_t ld_out, const int32_t* cu_seqlens, int64_t num_seqs, int64_t heads,
                      int64_t head_dim, float scale, float* scratch, size_t scratch_floats);

}  // namespace encoder_kit::cpu
