#include "qwen3_cpu_forward.hpp"

#include "qwen3_batch.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace qwen3 {
namespace {

using encoder_kit::fail;

// Workspace carved into the activations of one forward.
struct Activations {
  float* x;       // [patches, hidden] residual stream
  float* normed;  // [patches, hidden] (also [tokens, 4 hidden] in the mergers)
  float* qkv;     // [patches, 3 hidden]
  float* attn;    // [patches, hidden] (also [tokens, 4 hidden] in the mergers)
  float* mlp;     // [patches, inter]
  float* merged;  // [tokens, out_hidden] a merger's output in layout order
  float* scratch;
  size_t scratch_floats;
  size_t total_floats;
};

Activations carve(const VisionConfig& c, const Capacity& cap, float* base) {
  const size_t p = static_cast<size_t>(cap.patches), d = static_cast<size_t>(c.hidden_size);
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
  a.mlp = take(p * static_cast<size_t>(c.intermediate_size));
  a.merged = take(static_cast<size_t>(cap.tokens * c.out_hidden_size));
  a.scratch_floats =
      encoder_kit::cpu::attention_scratch_floats(cap.max_frame_patches, c.head_dim());
  a.scratch = take(a.scratch_floats);
  a.total_floats = off;
  return a;
}

// Qwen3VLVisionPatchMerger on the residual stream `x` ([tokens, 4 hidden] as
// 4 consecutive patch rows): LayerNorm per patch (main merger) or per 4-patch
// row (postshuffle, the deepstack mergers), fc1, erf GELU, fc2; then the rows
// gathered into batch order.
void merger(const VisionConfig& c, const MergerWeights& m, bool postshuffle, const Capacity& cap,
            const Activations& a, const int32_t* token_index, float* out) {
  namespace k = encoder_kit::cpu;
  const int64_t d = c.hidden_size, tokens = cap.tokens, md = d * c.merge_unit();
  if (postshuffle)
    k::layer_norm(a.x, tokens, md, m.norm_w.data(), m.norm_b.data(), c.layer_norm_eps, a.normed);
  else
    k::layer_norm(a.x, cap.patches, d, m.norm_w.data(), m.norm_b.data(), c.layer_norm_eps,
                  a.normed);
  k::linear(a.normed, tokens, md, m.fc1_w.data(), m.fc1_b.data(), md, a.attn);
  k::gelu_erf(a.attn, static_cast<size_t>(tokens * md));
  k::linear(a.attn, tokens, md, m.fc2_w.data(), m.fc2_b.data(), c.out_hidden_size, a.merged);
  const size_t row_bytes = static_cast<size_t>(c.out_hidden_size) * sizeof(float);
  for (int64_t r = 0; r < tokens; ++r)
    std::memcpy(out + r * c.out_hidden_size,
                a.merged + static_cast<int64_t>(token_index[r]) * c.out_hidden_size, row_bytes);
}

}  // namespace

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap) {
  return carve(c, cap, nullptr).total_floats * sizeof(float);
}

void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* const* outputs, void* workspace,
                 size_t workspace_bytes) {
  namespace k = encoder_kit::cpu;
  const Activations a = carve(c, cap, static_cast<float*>(workspace));
  if (a.total_floats * sizeof(float) > workspace_bytes)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const int64_t p = cap.patches, d = c.hidden_size, inter = c.intermediate_size;
  const int64_t heads = c.num_heads, hd = c.head_dim();
  const auto* pixels = static_cast<const float*>(buffers[kPixelRows].data);
  const auto* pos_index = static_cast<const int32_t*>(buffers[kPosIndex].data);
  const auto* pos_weight = static_cast<const float*>(buffers[kPosWeight].data);
  const auto* cos = static_cast<const float*>(buffers[kRopeCos].data);
  const auto* sin = static_cast<const float*>(buffers[kRopeSin].data);
  const auto* cu = static_cast<const int32_t*>(buffers[kCuSeqlens].data);
  const auto* token_index = static_cast<const int32_t*>(buffers[kTokenIndex].data);
  const int64_t n_seqs = buffers[kCuSeqlens].shape[0] - 1;
  // The tables index the activations and the weights: a bad entry must fail,
  // not read wild.
  for (int64_t s = 0; s <= n_seqs; ++s)
    if (cu[s] < (s ? cu[s - 1] : 0) || cu[s] > p)
      fail(EG_ERR_INVALID_ARGUMENT,
           "qwen3_vl: cu_seqlens[" + std::to_string(s) + "] = " + std::to_string(cu[s]) +
               " is out of order or past the " + std::to_string(p) + " patch rows");
  for (int64_t i = 0; i < p * 4; ++i)
    if (pos_index[i] < 0 || pos_index[i] >= c.num_position_embeddings)
      fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: pos_index entry " + std::to_string(pos_index[i]) +
                                        " at row " + std::to_string(i / 4) + " is outside [0, " +
                                        std::to_string(c.num_position_embeddings) + ")");
  for (int64_t r = 0; r < cap.tokens; ++r)
    if (token_index[r] < 0 || token_index[r] >= cap.tokens)
      fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: token_index " + std::to_string(token_index[r]) +
                                        " out of range at row " + std::to_string(r));

  // Patch embedding (a Conv3d with stride == kernel: one product, with bias),
  // plus the bilinearly interpolated learned position embedding.
  k::linear(pixels, p, c.patch_dim(), w.patch_embed_w.data(), w.patch_embed_b.data(), d, a.x);
  // One row per task, corners in order: the same sums on any thread count.
  k::pool().parallel_for(p, std::max<int64_t>(1, 4096 / d), [&](int64_t rb, int64_t re, int) {
    for (int64_t r = rb; r < re; ++r) {
      float* x = a.x + r * d;
      for (int64_t corner = 0; corner < 4; ++corner) {
        const float wt = pos_weight[r * 4 + corner];
        const float* e = w.pos_embed.data() + static_cast<int64_t>(pos_index[r * 4 + corner]) * d;
        for (int64_t j = 0; j < d; ++j) x[j] += wt * e[j];
      }
    }
  });
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t i = 0; i < c.depth; ++i) {
    const BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    k::layer_norm(a.x, p, d, b.norm1_w.data(), b.norm1_b.data(), c.layer_norm_eps, a.normed);
    k::linear(a.normed, p, d, b.qkv_w.data(), b.qkv_b.data(), 3 * d, a.qkv);
    k::rotary_half(a.qkv, p, 3 * d, heads, hd, cos, sin);      // q
    k::rotary_half(a.qkv + d, p, 3 * d, heads, hd, cos, sin);  // k
    // Rows past the last sequence (graph padding) belong to no sequence: zero
    // them so they stay finite and cheap.
    const int64_t covered = cu[n_seqs];
    if (covered < p)
      std::memset(a.attn + covered * d, 0, static_cast<size_t>((p - covered) * d) * sizeof(float));
    k::varlen_attention(a.qkv, a.qkv + d, a.qkv + 2 * d, 3 * d, a.attn, d, cu, n_seqs, heads, hd,
                        scale, a.scratch, a.scratch_floats);
    k::linear(a.attn, p, d, b.proj_w.data(), b.proj_b.data(), d, a.x, /*accumulate=*/true);
    k::layer_norm(a.x, p, d, b.norm2_w.data(), b.norm2_b.data(), c.layer_norm_eps, a.normed);
    k::linear(a.normed, p, d, b.fc1_w.data(), b.fc1_b.data(), inter, a.mlp);
    k::gelu_tanh(a.mlp, static_cast<size_t>(p * inter));
    k::linear(a.mlp, p, inter, b.fc2_w.data(), b.fc2_b.data(), d, a.x, /*accumulate=*/true);
    if (const int64_t slot = c.deepstack_slot(i); slot >= 0)
      merger(c, w.deepstack[static_cast<size_t>(c.deepstack_merger(slot))], /*postshuffle=*/true,
             cap, a, token_index, outputs[1 + slot]);
  }
  merger(c, w.merger, /*postshuffle=*/false, cap, a, token_index, outputs[0]);
}

}  // namespace qwen3
