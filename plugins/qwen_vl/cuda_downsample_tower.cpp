// GLM-4.1V's forward on CUDA (Attention::Full, PosEmbed::Bicubic, Norm::Rms,
// Mlp::GatedSilu out_hidden_size wide, Outputs::Downsample): cuBLASLt
// products (the MLP's gate and up as one [gate | up] product, then SiLU·mul),
// RMSNorm, rotary, variable-length flash attention; the bicubic position
// embedding through the tap kernel (pos_embed_kernel.cu, 16 taps); then
// post_layernorm, the downsample Conv2d as one product over each unit's rows,
// and GLM's merger (proj, LayerNorm, erf GELU, gate/up, SiLU·mul, down).
#include "cuda_tower.hpp"
#include "layout.hpp"
#include "pos_embed_kernel.hpp"
#include "spec.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace qwen_vl {
namespace {

constexpr float kMergerLayerNormEps = 1e-5f;  // nn.LayerNorm's default

struct DeviceBlock {
  const bf16 *norm1_w, *norm2_w, *qkv_w, *qkv_b, *proj_w, *gate_up_w, *down_w;
};

// [gate; up] stacked as rows: one product gives [gate | up] per row.
std::vector<float> stack_rows(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> v(gate);
  v.insert(v.end(), up.begin(), up.end());
  return v;
}

class DownsampleTower final : public CudaTower {
 public:
  DownsampleTower(const Options& o, const Weights& w, int device_index, Warn warn)
      : CudaTower(o.model, device_index, o.model.mlp_width()) {
    gate_up_room = true;
    // The merger's activations reuse the blocks' buffers: [tokens, out] in
    // `attn` / `normed` ([patches, d] = [tokens, 4d]) and [tokens, 2 inter] /
    // [tokens, inter] in `gate_up` / `act` ([patches, 2 out] / [patches, out]).
    const int64_t units = c.merge_unit();
    if (c.out_hidden_size > units * c.hidden_size || c.intermediate_size > units * c.mlp_width())
      fail(EG_ERR_UNSUPPORTED,
           "out_hidden_size " + std::to_string(c.out_hidden_size) + " must be at most " +
               std::to_string(units) + " x hidden_size and intermediate_size " +
               std::to_string(c.intermediate_size) + " at most " + std::to_string(units) +
               " x out_hidden_size for the CUDA forward's buffers (the released towers are)");
    start(o, w, std::move(warn));
  }

 private:
  const bf16 *post_conv_w = nullptr, *pos_embed = nullptr, *post_norm_w = nullptr;
  const bf16 *conv_w = nullptr, *conv_b = nullptr, *merger_proj_w = nullptr;
  const bf16 *merger_norm_w = nullptr, *merger_norm_b = nullptr;
  const bf16 *merger_gate_up_w = nullptr, *merger_down_w = nullptr;
  std::vector<DeviceBlock> blocks;
  k::GemmPlan gate_up, down, merger_gate_up, merger_down;

  void upload(const Weights& w) override {
    // Checkpoint arrays outlive upload(); the stacked [gate; up] copies are
    // temporaries, which weights.add() must keep (its rvalue overload), so they
    // are passed to it directly, never through `add`'s const reference.
    auto add = [&](const bf16** dst, const std::vector<float>& v) { weights.add(dst, v); };
    add(&patch_w, w.patch_embed_w);
    add(&patch_b, w.patch_embed_b);
    add(&post_conv_w, w.post_conv_norm_w);
    add(&pos_embed, w.pos_embed);
    blocks.resize(w.blocks.size());
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      const BlockWeights& b = w.blocks[i];
      DeviceBlock& d = blocks[i];
      add(&d.norm1_w, b.norm1_w);
      add(&d.norm2_w, b.norm2_w);
      add(&d.qkv_w, b.qkv_w);
      if (c.attention_bias) add(&d.qkv_b, b.qkv_b);
      add(&d.proj_w, b.proj_w);
      weights.add(&d.gate_up_w, stack_rows(b.fc1_w, b.up_w));
      add(&d.down_w, b.fc2_w);
    }
    const DownsampleWeights& g = w.downsample;
    add(&post_norm_w, g.post_norm_w);
    add(&conv_w, g.conv_w);
    add(&conv_b, g.conv_b);
    add(&merger_proj_w, g.proj_w);
    add(&merger_norm_w, g.norm_w);
    add(&merger_norm_b, g.norm_b);
    weights.add(&merger_gate_up_w, stack_rows(g.gate_w, g.up_w));
    add(&merger_down_w, g.down_w);
    weights.upload(who);
  }

  std::array<k::GemmPlan*, 2> plan_mlp(int64_t patches) override {
    const int64_t d = c.hidden_size, width = mlp_width, o = c.out_hidden_size;
    const int64_t wide = c.intermediate_size;
    const int64_t tokens = std::max<int64_t>(patches / c.merge_unit(), 1);
    check(gate_up.initialize(patches, 2 * width, d, Epilogue::None, false), "planning mlp gate/up");
    check(down.initialize(patches, d, width, Epilogue::None, true), "planning mlp.down_proj");
    check(merger_gate_up.initialize(tokens, 2 * wide, o, Epilogue::None, false),
          "planning merger gate/up");
    check(merger_down.initialize(tokens, o, wide, Epilogue::None, false),
          "planning merger down_proj");
    merger_gate_up.set_tuning_cache(gemm_cache);
    merger_down.set_tuning_cache(gemm_cache);
    return {&gate_up, &down};
  }

  void tune_products(const Activations& a, int64_t p, int64_t tokens, size_t ws,
                     cudaStream_t s) override {
    const DeviceBlock& b = blocks[0];
    check(qkv.tune(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws, ws, s),
          "tune");
    check(proj.tune(handle, a.attn, b.proj_w, nullptr, a.normed, a.normed, p, a.gemm_ws, ws, s),
          "tune");
    check(gate_up.tune(handle, a.normed, b.gate_up_w, nullptr, nullptr, a.gate_up, p, a.gemm_ws, ws,
                       s),
          "tune");
    check(down.tune(handle, a.act, b.down_w, nullptr, a.normed, a.normed, p, a.gemm_ws, ws, s),
          "tune");
    check(
        merge1.tune(handle, a.normed, conv_w, conv_b, nullptr, a.merged, tokens, a.gemm_ws, ws, s),
        "tune");
    check(merge2.tune(handle, a.merged, merger_proj_w, nullptr, nullptr, a.attn, tokens, a.gemm_ws,
                      ws, s),
          "tune");
    check(merger_gate_up.tune(handle, a.normed, merger_gate_up_w, nullptr, nullptr, a.gate_up,
                              tokens, a.gemm_ws, ws, s),
          "tune");
    check(merger_down.tune(handle, a.act, merger_down_w, nullptr, nullptr, a.merged, tokens,
                           a.gemm_ws, ws, s),
          "tune");
  }

  // down(silu(gate(x)) * up(x)) on `rows` rows of `x`, `width` wide: the
  // [gate | up] product into a.gate_up, SiLU·mul into a.act, then `down_plan`
  // (with the residual when `residual` is set) into `out`.
  void gated(const k::GemmPlan& gu, const k::GemmPlan& dn, const bf16* x, const bf16* gu_w,
             const bf16* dn_w, int64_t rows, int64_t width, const Activations& a, bf16* residual,
             bf16* out, size_t ws, cudaStream_t s) const {
    check(gu.run(handle, x, gu_w, nullptr, nullptr, a.gate_up, rows, a.gemm_ws, ws, s), "gate/up");
    check(k::silu_mul_bf16(a.gate_up, 2 * width, a.gate_up + width, 2 * width, a.act, width, rows,
                           width, s),
          "silu mul");
    check(dn.run(handle, a.act, dn_w, nullptr, residual, out, rows, a.gemm_ws, ws, s), "down_proj");
  }

  void run(const Pass& f, void* const* outputs) override {
    const auto& [cap, a, in, s, p, tokens, d, heads, hd, scale, gemm_ws] = f;
    const int64_t o = c.out_hidden_size;
    // Patch embedding (Conv3d with stride = kernel: one product with bias),
    // post_conv_layernorm, then the learned grid sampled bicubically per item.
    check(
        patch.run(handle, in.pixels, patch_w, patch_b, nullptr, a.normed, p, a.gemm_ws, gemm_ws, s),
        "patch_embed");
    check(k::rms_norm_bf16(a.normed, post_conv_w, a.x, p, d, c.norm_eps, s), "post_conv_layernorm");
    check(pos_embed_add_bf16(a.x, pos_embed, c.num_position_embeddings, in.pos_index, in.pos_weight,
                             static_cast<int>(pos_taps(*c.spec)), p, d, s),
          "embeddings");
    const std::vector<SeqBucket> buckets = full_attention_buckets(cap);
    for (int64_t i = 0; i < c.depth; ++i) {
      const DeviceBlock& b = blocks[static_cast<size_t>(i)];
      check(k::rms_norm_bf16(a.x, b.norm1_w, a.normed, p, d, c.norm_eps, s), "norm1");
      check(qkv.run(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws, gemm_ws, s),
            "attn.qkv");
      check(k::rotary_bf16(a.qkv, p, heads, hd, in.cos, in.sin, hd / 2, s), "rotary");
      for (const SeqBucket& bk : buckets)
        check(
            k::varlen_attention_bf16(a.qkv, in.cu_seqlens + bk.first, static_cast<int>(bk.count),
                                     static_cast<int>(bk.max_seqlen), heads, hd, scale, a.attn, s),
            "attention");
      check(proj.run(handle, a.attn, b.proj_w, nullptr, a.x, a.x, p, a.gemm_ws, gemm_ws, s),
            "attn.proj");
      check(k::rms_norm_bf16(a.x, b.norm2_w, a.normed, p, d, c.norm_eps, s), "norm2");
      gated(gate_up, down, a.normed, b.gate_up_w, b.down_w, p, mlp_width, a, a.x, a.x, gemm_ws, s);
    }
    // post_layernorm; the unit's 4 rows side by side are the Conv2d's input.
    check(k::rms_norm_bf16(a.x, post_norm_w, a.normed, p, d, c.norm_eps, s), "post_layernorm");
    check(merge1.run(handle, a.normed, conv_w, conv_b, nullptr, a.merged, tokens, a.gemm_ws,
                     gemm_ws, s),
          "downsample");
    check(merge2.run(handle, a.merged, merger_proj_w, nullptr, nullptr, a.attn, tokens, a.gemm_ws,
                     gemm_ws, s),
          "merger proj");
    check(k::layer_norm_bf16(a.attn, merger_norm_w, merger_norm_b, a.normed, tokens, o,
                             kMergerLayerNormEps, s),
          "merger post_projection_norm");
    check(k::gelu_bf16(a.normed, a.normed, tokens * o, /*tanh_approximation=*/false, s),
          "merger GELU");
    gated(merger_gate_up, merger_down, a.normed, merger_gate_up_w, merger_down_w, tokens,
          c.intermediate_size, a, nullptr, a.merged, gemm_ws, s);
    check(
        k::gather_rows_bf16(a.merged, in.token_index, static_cast<bf16*>(outputs[0]), tokens, o, s),
        "output order");
  }
};

}  // namespace

std::unique_ptr<CudaModel> make_downsample_tower(const Options& o, const Weights& w,
                                                 int device_index, Warn warn) {
  return std::make_unique<DownsampleTower>(o, w, device_index, std::move(warn));
}

}  // namespace qwen_vl
