#include "qwen_cpu_forward.hpp"

#include "qwen_batch.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

namespace qwen {
namespace {

// Workspace carved into the activations of one forward.
struct Activations {
  float* x;        // [patches, hidden] residual stream
  float* normed;   // [patches, hidden]
  float* qkv;      // [patches, 3 hidden]
  float* attn;     // [patches, hidden]
  float* gate;     // [patches, inter]
  float* up;       // [patches, inter]
  float* merged;   // [tokens, out_hidden] merger output in window order
  float* scratch;  // attention scores
  size_t scratch_floats;
  size_t total_floats;
};

Activations carve(const VisionConfig& c, const Capacity& cap, float* base) {
  const size_t p = static_cast<size_t>(cap.patches), d = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
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
  a.gate = take(p * inter);
  a.up = take(p * inter);
  a.merged = take(static_cast<size_t>(cap.tokens * c.out_hidden_size));
  a.scratch_floats = encoder_kit::cpu::attention_scratch_floats(
      std::max(cap.max_frame_patches, cap.max_window_patches), c.head_dim());
  a.scratch = take(a.scratch_floats);
  a.total_floats = off;
  return a;
}

}  // namespace

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap) {
  return carve(c, cap, nullptr).total_floats * sizeof(float);
}

void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* output, void* workspace, size_t workspace_bytes) {
  namespace k = encoder_kit::cpu;
  const Activations a = carve(c, cap, static_cast<float*>(workspace));
  if (a.total_floats * sizeof(float) > workspace_bytes)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,
        "qwen2_5_vl: workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const int64_t p = cap.patches, d = c.hidden_size, inter = c.intermediate_size;
  const int64_t heads = c.num_heads, hd = c.head_dim();
  const auto* pixels = static_cast<const float*>(buffers[kPixelRows].data);
  const auto* cos = static_cast<const float*>(buffers[kRopeCos].data);
  const auto* sin = static_cast<const float*>(buffers[kRopeSin].data);
  const auto* cu_frames = static_cast<const int32_t*>(buffers[kCuFrames].data);
  const auto* cu_windows = static_cast<const int32_t*>(buffers[kCuWindows].data);
  const auto* inverse = static_cast<const int32_t*>(buffers[kInverse].data);
  const int64_t n_frames = buffers[kCuFrames].shape[0] - 1;
  const int64_t n_windows = buffers[kCuWindows].shape[0] - 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Sequence tables index the activations: a bad one must fail, not read wild.
  for (const auto& [cu, n, name] : {std::tuple{cu_frames, n_frames, "cu_seqlens"},
                                    std::tuple{cu_windows, n_windows, "cu_window_seqlens"}})
    for (int64_t s = 0; s <= n; ++s)
      if (cu[s] < (s ? cu[s - 1] : 0) || cu[s] > p)
        encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                          std::string("qwen2_5_vl: ") + name + "[" + std::to_string(s) +
                              "] = " + std::to_string(cu[s]) + " is out of order or past the " +
                              std::to_string(p) + " patch rows");

  // Patch embedding: the Conv3d with stride == kernel is one matrix product.
  k::linear(pixels, p, c.patch_dim(), w.patch_embed.data(), nullptr, d, a.x);
  for (int64_t i = 0; i < c.depth; ++i) {
    const BlockWeights& b = w.blocks[static_cast<size_t>(i)];
    const bool full = c.full_attention(i);
    const int32_t* cu = full ? cu_frames : cu_windows;
    const int64_t n_seqs = full ? n_frames : n_windows;
    k::rms_norm(a.x, p, d, b.norm1.data(), c.rms_norm_eps, a.normed);
    k::linear(a.normed, p, d, b.qkv_w.data(), b.qkv_b.data(), 3 * d, a.qkv);
    k::rotary_half(a.qkv, p, 3 * d, heads, hd, cos, sin);      // q
    k::rotary_half(a.qkv + d, p, 3 * d, heads, hd, cos, sin);  // k
    // Rows past the last sequence (graph padding) belong to no sequence: zero
    // them so they stay finite and cheap.
    const int64_t covered = cu[n_seqs];
    if (covered < p)
      std::memset(a.attn + covered * d, 0, static_cast<size_t>((p - covered) * d) * 4);
    k::varlen_attention(a.qkv, a.qkv + d, a.qkv + 2 * d, 3 * d, a.attn, d, cu, n_seqs, heads, hd,
                        scale, a.scratch, a.scratch_floats);
    k::linear(a.attn, p, d, b.proj_w.data(), b.proj_b.data(), d, a.x, /*accumulate=*/true);
    k::rms_norm(a.x, p, d, b.norm2.data(), c.rms_norm_eps, a.normed);
    k::linear(a.normed, p, d, b.gate_w.data(), b.gate_b.data(), inter, a.gate);
    k::linear(a.normed, p, d, b.up_w.data(), b.up_b.data(), inter, a.up);
    k::silu_mul(a.gate, a.up, static_cast<size_t>(p * inter));
    k::linear(a.gate, p, inter, b.down_w.data(), b.down_b.data(), d, a.x, /*accumulate=*/true);
  }
  // Patch merger: RMSNorm per patch, 4 consecutive patches (one merged unit)
  // side by side, then Linear, GELU, Linear.
  const int64_t tokens = cap.tokens, md = d * c.merge_unit();
  k::rms_norm(a.x, p, d, w.ln_q.data(), c.rms_norm_eps, a.normed);
  k::linear(a.normed, tokens, md, w.mlp0_w.data(), w.mlp0_b.data(), md, a.attn);
  k::gelu_erf(a.attn, static_cast<size_t>(tokens * md));
  k::linear(a.attn, tokens, md, w.mlp2_w.data(), w.mlp2_b.data(), c.out_hidden_size, a.merged);
  // Back from window order to the processor's token order.
  const size_t row_bytes = static_cast<size_t>(c.out_hidden_size) * sizeof(float);
  for (int64_t r = 0; r < tokens; ++r) {
    const int32_t src = inverse[r];
    if (src < 0 || src >= tokens)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: inverse window index " +
                                                     std::to_string(src) + " out of range at row " +
                                                     std::to_string(r));
    std::memcpy(output + r * c.out_hidden_size,
                a.merged + static_cast<int64_t>(src) * c.out_hidden_size, row_bytes);
  }
}

}  // namespace qwen
