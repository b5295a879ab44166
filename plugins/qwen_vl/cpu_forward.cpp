#include "forward.hpp"

#include "layout.hpp"
#include "spec.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace qwen_vl {
namespace {

namespace k = encoder_kit::cpu;
using encoder_kit::fail;

// Workspace carved into the activations of one forward.
struct Activations {
  float* x;       // [patches, hidden] residual stream
  float* normed;  // [patches, hidden] (also [tokens, 4 hidden] in the mergers)
  float* qkv;     // [patches, 3 hidden]
  float* attn;    // [patches, hidden] (also [tokens, 4 hidden] in the mergers)
  float* mlp;     // [patches, inter]: fc1's output, or gate_proj's (then SiLU·up)
  float* up;      // [patches, inter]: up_proj's output (Mlp::GatedSilu)
  float* merged;  // [tokens, out_hidden] a merger's output in unit order
  // Outputs::Downsample: [tokens, out_hidden], then the merger's gate and up
  // products [tokens, intermediate_size] each.
  float* head;
  float* head_gate;
  float* head_up;
  float* scratch;  // attention scores
  size_t scratch_floats;
  size_t total_floats;
};

Activations carve(const VisionConfig& c, const Capacity& cap, float* base) {
  const size_t p = static_cast<size_t>(cap.patches), d = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.mlp_width());
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t n) {
    float* ptr = base ? base + off : nullptr;
    off += (n + 63) / 64 * 64;  // keep every array 256-byte aligned
    return ptr;
  };
  a.x = take(p * d);
  a.normed = take(p * d);
  a.qkv = take(3 * p * d);
  a.attn = take(p * d);
  a.mlp = take(p * inter);
  if (c.spec->mlp == Mlp::GatedSilu) a.up = take(p * inter);
  a.merged = take(static_cast<size_t>(cap.tokens * c.out_hidden_size));
  if (c.spec->outputs == Outputs::Downsample) {
    const auto tokens = static_cast<size_t>(cap.tokens);
    a.head = take(tokens * static_cast<size_t>(c.out_hidden_size));
    a.head_gate = take(tokens * static_cast<size_t>(c.intermediate_size));
    a.head_up = take(tokens * static_cast<size_t>(c.intermediate_size));
  }
  a.scratch_floats = k::attention_scratch_floats(
      std::max(cap.max_frame_patches, cap.max_window_patches), c.head_dim());
  a.scratch = take(a.scratch_floats);
  a.total_floats = off;
  return a;
}

// The version's norm of `rows` rows of `dim` features.
void norm(const VisionConfig& c, const float* x, int64_t rows, int64_t dim,
          const std::vector<float>& w, const std::vector<float>& b, float* out) {
  if (c.spec->norm == Norm::Rms)
    k::rms_norm(x, rows, dim, w.data(), c.norm_eps, out);
  else
    k::layer_norm(x, rows, dim, w.data(), b.data(), c.norm_eps, out);
}

// A bias the version may lack (empty): null for k::linear.
const float* bias(const std::vector<float>& b) {
  return b.empty() ? nullptr : b.data();
}

// The version's MLP on normed rows, added to the residual stream x.
void mlp(const VisionConfig& c, const BlockWeights& b, int64_t p, const Activations& a) {
  const int64_t d = c.hidden_size, inter = c.mlp_width();
  k::linear(a.normed, p, d, b.fc1_w.data(), bias(b.fc1_b), inter, a.mlp);
  if (c.spec->mlp == Mlp::GatedSilu) {
    k::linear(a.normed, p, d, b.up_w.data(), bias(b.up_b), inter, a.up);
    k::silu_mul(a.mlp, a.up, static_cast<size_t>(p * inter));
  } else {
    k::gelu_tanh(a.mlp, static_cast<size_t>(p * inter));
  }
  k::linear(a.mlp, p, inter, b.fc2_w.data(), bias(b.fc2_b), d, a.x, /*accumulate=*/true);
}

// Outputs::Downsample on the residual stream: post_layernorm, the downsample
// Conv2d as a product over each unit's 4 consecutive patch rows, then GLM's
// merger (proj, LayerNorm, erf GELU, down(silu(gate) * up)); rows gathered
// into batch order.
void downsample_merger(const VisionConfig& c, const DownsampleWeights& g, const Capacity& cap,
                       const Activations& a, const int32_t* token_index, float* out) {
  constexpr float kLayerNormEps = 1e-5f;  // nn.LayerNorm's default, as the merger builds it
  const int64_t d = c.hidden_size, tokens = cap.tokens, o = c.out_hidden_size;
  const int64_t wide = c.intermediate_size;
  k::rms_norm(a.x, cap.patches, d, g.post_norm_w.data(), c.norm_eps, a.normed);
  k::linear(a.normed, tokens, d * c.merge_unit(), g.conv_w.data(), g.conv_b.data(), o, a.head);
  k::linear(a.head, tokens, o, g.proj_w.data(), nullptr, o, a.merged);
  k::layer_norm(a.merged, tokens, o, g.norm_w.data(), g.norm_b.data(), kLayerNormEps, a.head);
  k::gelu_erf(a.head, static_cast<size_t>(tokens * o));
  k::linear(a.head, tokens, o, g.gate_w.data(), nullptr, wide, a.head_gate);
  k::linear(a.head, tokens, o, g.up_w.data(), nullptr, wide, a.head_up);
  k::silu_mul(a.head_gate, a.head_up, static_cast<size_t>(tokens * wide));
  k::linear(a.head_gate, tokens, wide, g.down_w.data(), nullptr, o, a.merged);
  const size_t row_bytes = static_cast<size_t>(o) * sizeof(float);
  for (int64_t r = 0; r < tokens; ++r)
    std::memcpy(out + r * o, a.merged + static_cast<int64_t>(token_index[r]) * o, row_bytes);
}

// A patch merger on the residual stream `x` ([tokens, 4 hidden] as 4
// consecutive patch rows): the norm per patch (main merger) or per 4-patch row
// (postshuffle, the deepstack mergers), fc1, erf GELU, fc2; then the rows
// gathered into batch order.
void merger(const VisionConfig& c, const MergerWeights& m, bool postshuffle, const Capacity& cap,
            const Activations& a, const int32_t* token_index, float* out) {
  const int64_t d = c.hidden_size, tokens = cap.tokens, md = d * c.merge_unit();
  if (postshuffle)
    norm(c, a.x, tokens, md, m.norm_w, m.norm_b, a.normed);
  else
    norm(c, a.x, cap.patches, d, m.norm_w, m.norm_b, a.normed);
  k::linear(a.normed, tokens, md, m.fc1_w.data(), m.fc1_b.data(), md, a.attn);
  k::gelu_erf(a.attn, static_cast<size_t>(tokens * md));
  k::linear(a.attn, tokens, md, m.fc2_w.data(), m.fc2_b.data(), c.out_hidden_size, a.merged);
  const size_t row_bytes = static_cast<size_t>(c.out_hidden_size) * sizeof(float);
  for (int64_t r = 0; r < tokens; ++r)
    std::memcpy(out + r * c.out_hidden_size,
                a.merged + static_cast<int64_t>(token_index[r]) * c.out_hidden_size, row_bytes);
}

// The tables index the activations and the weights: a bad entry must fail,
// not read wild.
void check_sequences(const std::string& who, const char* name, const int32_t* cu, int64_t n,
                     int64_t p) {
  for (int64_t s = 0; s <= n; ++s)
    if (cu[s] < (s ? cu[s - 1] : 0) || cu[s] > p)
      fail(EG_ERR_INVALID_ARGUMENT,
           who + ": " + name + "[" + std::to_string(s) + "] = " + std::to_string(cu[s]) +
               " is out of order or past the " + std::to_string(p) + " patch rows");
}

void check_index(const std::string& who, const char* name, const int32_t* index, int64_t n,
                 int64_t per_row, int64_t limit) {
  for (int64_t i = 0; i < n * per_row; ++i)
    if (index[i] < 0 || index[i] >= limit)
      fail(EG_ERR_INVALID_ARGUMENT, who + ": " + name + " entry " + std::to_string(index[i]) +
                                        " at row " + std::to_string(i / per_row) +
                                        " is outside [0, " + std::to_string(limit) + ")");
}

}  // namespace

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap) {
  return carve(c, cap, nullptr).total_floats * sizeof(float);
}

void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* const* outputs, void* workspace,
                 size_t workspace_bytes) {
  const Spec& s = *c.spec;
  const std::string who = s.name;
  const Buffers bf(s);
  const Activations a = carve(c, cap, static_cast<float*>(workspace));
  if (a.total_floats * sizeof(float) > workspace_bytes)
    fail(EG_ERR_INVALID_ARGUMENT,
         who + ": workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const int64_t p = cap.patches, d = c.hidden_size;
  const int64_t heads = c.num_heads, hd = c.head_dim();
  const auto* pixels = static_cast<const float*>(buffers[bf.pixel_rows].data);
  const auto* cos = static_cast<const float*>(buffers[bf.rope_cos].data);
  const auto* sin = static_cast<const float*>(buffers[bf.rope_sin].data);
  const auto* cu_frames = static_cast<const int32_t*>(buffers[bf.cu_seqlens].data);
  const auto* token_index = static_cast<const int32_t*>(buffers[bf.token_index].data);
  const int64_t n_frames = buffers[bf.cu_seqlens].shape[0] - 1;
  const int32_t* cu_windows = nullptr;
  int64_t n_windows = 0;
  check_sequences(who, "cu_seqlens", cu_frames, n_frames, p);
  if (bf.cu_window_seqlens >= 0) {
    cu_windows = static_cast<const int32_t*>(buffers[bf.cu_window_seqlens].data);
    n_windows = buffers[bf.cu_window_seqlens].shape[0] - 1;
    check_sequences(who, "cu_window_seqlens", cu_windows, n_windows, p);
  }
  check_index(who, s.attention == Attention::Windowed ? "inverse_window_index" : "token_index",
              token_index, cap.tokens, 1, cap.tokens);

  // Patch embedding (a Conv3d with stride == kernel: one product), its norm
  // (Spec::post_conv_norm), plus the interpolated learned position embedding.
  k::linear(pixels, p, c.patch_dim(), w.patch_embed_w.data(),
            s.patch_bias ? w.patch_embed_b.data() : nullptr, d, a.x);
  if (s.post_conv_norm) {
    k::rms_norm(a.x, p, d, w.post_conv_norm_w.data(), c.norm_eps, a.normed);
    std::memcpy(a.x, a.normed, static_cast<size_t>(p * d) * sizeof(float));
  }
  if (bf.pos_index >= 0) {
    const auto* pos_index = static_cast<const int32_t*>(buffers[bf.pos_index].data);
    const auto* pos_weight = static_cast<const float*>(buffers[bf.pos_weight].data);
    const int64_t taps = pos_taps(s);
    check_index(who, "pos_index", pos_index, p, taps, c.num_position_embeddings);
    // One row per task, taps in order: the same sums on any thread count.
    k::pool().parallel_for(p, std::max<int64_t>(1, 4096 / d), [&](int64_t rb, int64_t re, int) {
      for (int64_t r = rb; r < re; ++r) {
        float* x = a.x + r * d;
        for (int64_t tap = 0; tap < taps; ++tap) {
          const float wt = pos_weight[r * taps + tap];
          const float* e = w.pos_embed.data() + static_cast<int64_t>(pos_index[r * taps + tap]) * d;
          for (int64_t j = 0; j < d; ++j) x[j] += wt * e[j];
        }
      }
    });
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t i = 0; i < c.depth; ++i) {
    const BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    const bool full = c.full_attention(i);
    const int32_t* cu = full ? cu_frames : cu_windows;
    const int64_t n_seqs = full ? n_frames : n_windows;
    norm(c, a.x, p, d, b.norm1_w, b.norm1_b, a.normed);
    k::linear(a.normed, p, d, b.qkv_w.data(), bias(b.qkv_b), 3 * d, a.qkv);
    k::rotary_half(a.qkv, p, 3 * d, heads, hd, cos, sin);      // q
    k::rotary_half(a.qkv + d, p, 3 * d, heads, hd, cos, sin);  // k
    // Rows past the last sequence (graph padding) belong to no sequence: zero
    // them so they stay finite and cheap.
    const int64_t covered = cu[n_seqs];
    if (covered < p)
      std::memset(a.attn + covered * d, 0, static_cast<size_t>((p - covered) * d) * sizeof(float));
    k::varlen_attention(a.qkv, a.qkv + d, a.qkv + 2 * d, 3 * d, a.attn, d, cu, n_seqs, heads, hd,
                        scale, a.scratch, a.scratch_floats);
    k::linear(a.attn, p, d, b.proj_w.data(), bias(b.proj_b), d, a.x, /*accumulate=*/true);
    norm(c, a.x, p, d, b.norm2_w, b.norm2_b, a.normed);
    mlp(c, b, p, a);
    // Deepstack outputs come in layer order, each from its own merger.
    if (const int64_t slot = c.deepstack_slot(i); slot >= 0)
      merger(c, w.deepstack[static_cast<size_t>(c.deepstack_merger(slot))], /*postshuffle=*/true,
             cap, a, token_index, outputs[1 + slot]);
  }
  if (s.outputs == Outputs::Downsample)
    downsample_merger(c, w.downsample, cap, a, token_index, outputs[0]);
  else
    merger(c, w.merger, /*postshuffle=*/false, cap, a, token_index, outputs[0]);
}

}  // namespace qwen_vl
