#include "siglip_weights.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace siglip {
namespace {

namespace k = encoder_kit::cpu;

// Workspace carved into the activations of one forward.
struct Activations {
  float* x;        // [rows, hidden] residual stream
  float* normed;   // [rows, hidden]
  float* qkv;      // [rows, 3 hidden]; the head's k|v [rows, 2 hidden]
  float* attn;     // [rows, hidden]
  float* mlp;      // [rows, inter]
  float* scratch;  // attention scores
  size_t scratch_floats;
  size_t total_floats;
};

Activations carve(const Options& o, const Capacity& cap, float* base) {
  const size_t r = static_cast<size_t>(cap.rows), d = static_cast<size_t>(o.model.hidden_size);
  const size_t inter = static_cast<size_t>(o.model.intermediate_size);
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t n) {
    float* ptr = base ? base + off : nullptr;
    off += (n + 63) / 64 * 64;  // every array 256-byte aligned
    return ptr;
  };
  a.x = take(r * d);
  a.normed = take(r * d);
  a.qkv = take(3 * r * d);
  a.attn = take(r * d);
  a.mlp = take(r * inter);
  a.scratch_floats = k::attention_scratch_floats(o.model.tokens_per_image(), o.model.head_dim());
  a.scratch = take(a.scratch_floats);
  a.total_floats = off;
  return a;
}

// The offsets index the activations: a bad table must fail, not read wild.
int64_t check_cu_seqlens(const int32_t* cu, int64_t n, const Options& o, const Capacity& cap) {
  for (int64_t s = 0; s <= n; ++s) {
    const int64_t prev = s ? cu[s - 1] : 0;
    if (cu[s] < prev || cu[s] > cap.rows || cu[s] - prev > o.model.tokens_per_image())
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        "siglip: cu_seqlens[" + std::to_string(s) + "] = " + std::to_string(cu[s]) +
                            " is out of order, past the " + std::to_string(cap.rows) +
                            " rows or longer than one image");
  }
  return cu[n];
}

// The learned probe attends over each image's tokens (hidden: [rows, d]);
// writes one row per sequence into pooled [num_seqs, d] (zeros for an empty one).
void probe_attention(const Options& o, const HeadWeights& h, const float* kv, const int32_t* cu,
                     int64_t num_seqs, float* pooled, float* scores) {
  const VisionConfig& c = o.model;
  const int64_t d = c.hidden_size, hd = c.head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t s = 0; s < num_seqs; ++s) {
    float* out = pooled + s * d;
    std::fill(out, out + d, 0.0f);
    const int64_t start = cu[s], len = cu[s + 1] - cu[s];
    if (len <= 0) continue;
    for (int64_t head = 0; head < c.num_attention_heads; ++head) {
      const float* q = h.query.data() + head * hd;
      float m = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const float* key = kv + (start + j) * 2 * d + head * hd;
        float dot = 0.0f;
        for (int64_t e = 0; e < hd; ++e) dot += q[e] * key[e];
        scores[j] = dot * scale;
        m = std::max(m, scores[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < len; ++j) sum += (scores[j] = std::exp(scores[j] - m));
      for (int64_t j = 0; j < len; ++j) {
        const float* value = kv + (start + j) * 2 * d + d + head * hd;
        const float p = scores[j] / sum;
        for (int64_t e = 0; e < hd; ++e) out[head * hd + e] += p * value[e];
      }
    }
  }
}

// SiglipMultiheadAttentionPoolingHead on hidden [rows, d] (a.normed, reused
// once k|v are computed); output [images, d].
void pooling_head(const Options& o, const HeadWeights& h, const Activations& a, const float* hidden,
                  int64_t rows, const int32_t* cu, int64_t images, float* output) {
  const VisionConfig& c = o.model;
  const int64_t d = c.hidden_size, inter = c.intermediate_size;
  k::linear(hidden, rows, d, h.kv_w.data(), h.kv_b.data(), 2 * d, a.qkv);
  probe_attention(o, h, a.qkv, cu, images, a.attn, a.scratch);
  // k|v are computed: the residual stream and `hidden` are free from here on.
  float* pooled = a.x;
  k::linear(a.attn, images, d, h.out_w.data(), h.out_b.data(), d, pooled);
  k::layer_norm(pooled, images, d, h.ln_w.data(), h.ln_b.data(), c.layer_norm_eps, a.normed);
  k::linear(a.normed, images, d, h.fc1_w.data(), h.fc1_b.data(), inter, a.mlp);
  k::gelu_tanh(a.mlp, static_cast<size_t>(images * inter));
  std::memcpy(output, pooled, static_cast<size_t>(images * d) * sizeof(float));
  k::linear(a.mlp, images, inter, h.fc2_w.data(), h.fc2_b.data(), d, output, /*accumulate=*/true);
}

}  // namespace

size_t cpu_workspace_bytes(const Options& o, const Capacity& cap) {
  return carve(o, cap, nullptr).total_floats * sizeof(float);
}

void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 const OutputPtrs& outputs, void* workspace, size_t workspace_bytes) {
  const VisionConfig& c = o.model;
  const Activations a = carve(o, cap, static_cast<float*>(workspace));
  if (a.total_floats * sizeof(float) > workspace_bytes)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,
        "siglip: workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const int64_t rows = cap.rows, d = c.hidden_size, t = c.tokens_per_image();
  const auto* pixels = static_cast<const float*>(buffers[kPixelRows].data);
  const auto* cu = static_cast<const int32_t*>(buffers[kCuSeqlens].data);
  const int64_t num_seqs = buffers[kCuSeqlens].shape[0] - 1;
  const int64_t covered = check_cu_seqlens(cu, num_seqs, o, cap);

  // Patch embedding: a Conv2d with stride == kernel is one matrix product;
  // then the learned position of each token within its image.
  k::linear(pixels, rows, c.patch_cols(), w.patch_w.data(), w.patch_b.data(), d, a.x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* pos = w.pos.data() + (r % t) * d;
    float* x = a.x + r * d;
    for (int64_t e = 0; e < d; ++e) x[e] += pos[e];
  }
  for (const LayerWeights& l : w.layers)
    encoder_kit::cpu::prenorm_layer(
        c.layer_form(), l, {a.x, a.normed, a.qkv, a.attn, a.mlp, a.scratch, a.scratch_floats}, rows,
        cu, num_seqs, covered);

  // The last hidden state goes straight into its output when one is asked
  // for; the pooling head then reads it from there (it only reads `hidden`).
  auto* hidden_out = static_cast<float*>(outputs.last_hidden_state);
  float* hidden = hidden_out ? hidden_out : a.normed;
  if (o.uses_post_layernorm())
    k::layer_norm(a.x, rows, d, w.post_ln_w.data(), w.post_ln_b.data(), c.layer_norm_eps, hidden);
  else
    std::memcpy(hidden, a.x, static_cast<size_t>(rows * d) * sizeof(float));
  if (outputs.pooled)
    pooling_head(o, w.head, a, hidden, rows, cu, num_seqs, static_cast<float*>(outputs.pooled));
}

}  // namespace siglip
