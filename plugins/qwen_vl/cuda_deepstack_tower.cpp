// Qwen3-VL's forward on CUDA (Attention::Full, PosEmbed::Interpolated,
// Norm::Layer, Mlp::GeluTanh, deepstack outputs): cuBLASLt products with fused
// bias, residual add and GELU (tanh in the blocks, erf in the mergers),
// LayerNorm, rotary, variable-length flash attention; plus the interpolated
// position embedding (pos_embed_kernel.cu). With precision = "fp8_linear"
// the blocks' qkv, fc1 and fc2 run in FP8, proj in bf16 (fp8_block).
#include "cuda_tower.hpp"
#include "layout.hpp"
#include "pos_embed_kernel.hpp"
#include "spec.hpp"

#include <encoder_kit/cuda/fp8_block.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace qwen_vl {
namespace {

// The MLP width on the device, padded to a multiple of 16 with zero rows of
// fc1 and zero columns of fc2 (gelu(0) * 0 = 0 adds nothing): cuBLASLt runs
// products whose K rows are not 16-byte multiples several times slower
// (bench/kernels/EXPERIMENTS.md). The released towers (4304, 4096) need none.
int64_t padded_intermediate(const VisionConfig& c) {
  return (c.intermediate_size + 15) / 16 * 16;
}

struct DeviceBlock {
  const bf16 *norm1_w, *norm1_b, *norm2_w, *norm2_b;
  const bf16 *qkv_w, *qkv_b, *proj_w, *proj_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
  // precision = "fp8_linear": the block for the kit's FP8 block (qkv, fc1
  // and fc2 as e4m3 codes, padded as above, the norms folded in; proj bf16);
  // the bf16 norms and weights above are then not uploaded.
  k::Fp8BlockWeights fp8;
};

struct DeviceMerger {
  const bf16 *norm_w, *norm_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
};

class DeepstackTower final : public CudaTower {
 public:
  DeepstackTower(const Options& o, const Weights& w, int device_index, Warn warn);

 private:
  void run(const Pass& f, void* const* outputs) override;

  const bf16* pos_embed = nullptr;
  std::vector<DeviceBlock> blocks;
  DeviceMerger merger{};
  std::vector<DeviceMerger> deepstack;
  k::GemmPlan fc1, fc2;
  bool fp8 = false;  // precision = "fp8_linear"
  k::Fp8PreNormBlock block8;

  void upload(const Weights& w) override {
    if (w.deepstack.size() != c.deepstack_visual_indexes.size())
      fail(EG_ERR_INTERNAL, std::to_string(w.deepstack.size()) + " deepstack mergers for " +
                                std::to_string(c.deepstack_visual_indexes.size()) +
                                " deepstack_visual_indexes");
    auto add = [&](const bf16** dst, const std::vector<float>& v) { weights.add(dst, v); };
    // Zero-padded copies for the MLP width (see padded_intermediate).
    const int64_t inter = c.intermediate_size, ip = padded_intermediate(c), dm = c.hidden_size;
    std::deque<std::vector<float>> padded;
    auto pad_rows = [&](const std::vector<float>& v, int64_t cols) -> const std::vector<float>& {
      if (ip == inter) return v;
      padded.emplace_back(static_cast<size_t>(ip * cols), 0.0f);
      std::copy(v.begin(), v.end(), padded.back().begin());
      return padded.back();
    };
    auto add_merger = [&](DeviceMerger& d, const MergerWeights& m) {
      add(&d.norm_w, m.norm_w);
      add(&d.norm_b, m.norm_b);
      add(&d.fc1_w, m.fc1_w);
      add(&d.fc1_b, m.fc1_b);
      add(&d.fc2_w, m.fc2_w);
      add(&d.fc2_b, m.fc2_b);
    };
    add(&patch_w, w.patch_embed_w);
    add(&patch_b, w.patch_embed_b);
    add(&pos_embed, w.pos_embed);
    blocks.resize(w.blocks.size());
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      const BlockWeights& b = w.blocks[i];
      DeviceBlock& d = blocks[i];
      const std::vector<float>&fc1_w = pad_rows(b.fc1_w, dm), &fc1_b = pad_rows(b.fc1_b, 1),
            &fc2_w = pad_cols(b.fc2_w, dm, padded);
      if (fp8) {
        const std::string at = "blocks." + std::to_string(i) + ".";
        k::add_fp8_block(
            weights, d.fp8,
            {b.norm1_w, b.norm1_b, b.qkv_w, b.qkv_b, b.proj_w, b.proj_b, b.norm2_w, b.norm2_b,
             fc1_w, fc1_b, fc2_w, b.fc2_b},
            dm,
            {at + "attn.qkv.weight", at + "mlp.linear_fc1.weight", at + "mlp.linear_fc2.weight"});
        continue;
      }
      add(&d.norm1_w, b.norm1_w);
      add(&d.norm1_b, b.norm1_b);
      add(&d.norm2_w, b.norm2_w);
      add(&d.norm2_b, b.norm2_b);
      add(&d.qkv_w, b.qkv_w);
      add(&d.proj_w, b.proj_w);
      add(&d.fc1_w, fc1_w);
      add(&d.fc2_w, fc2_w);
      add(&d.qkv_b, b.qkv_b);
      add(&d.proj_b, b.proj_b);
      add(&d.fc1_b, fc1_b);
      add(&d.fc2_b, b.fc2_b);
    }
    add_merger(merger, w.merger);
    deepstack.resize(w.deepstack.size());
    for (size_t i = 0; i < w.deepstack.size(); ++i) add_merger(deepstack[i], w.deepstack[i]);
    weights.upload(who);
  }

  std::array<k::GemmPlan*, 2> plan_mlp(int64_t patches) override {
    const int64_t d = c.hidden_size, inter = padded_intermediate(c);
    check(fc1.initialize(patches, inter, d, Epilogue::BiasGeluTanh, false),
          "planning mlp.linear_fc1");
    check(fc2.initialize(patches, d, inter, Epilogue::Bias, true), "planning mlp.linear_fc2");
    if (fp8)  // the blocks' products as they run (the bf16 plans above stay idle)
      check(block8.initialize(patches, d, inter, c.norm_eps), "planning the blocks in FP8");
    return {&fc1, &fc2};
  }

  // A block with its products in FP8 (the kit's Fp8PreNormBlock); `buckets`
  // null: the products timed instead.
  void fp8_block(const DeviceBlock& b, const Pass& f, const std::vector<SeqBucket>* buckets) {
    const Activations& a = f.a;
    std::string what;
    const int rc = block8.run(
        handle, b.fp8, proj, {a.x, a.qkv, a.attn, a.act, a.q, a.q_scale, a.gemm_ws}, f.p,
        [&] {
          attention(f, *buckets);
          return 0;
        },
        buckets == nullptr, f.s, what);
    check(rc, what.c_str());
  }

  // A block in bf16: LayerNorm, qkv, attention, proj with its residual,
  // LayerNorm, fc1 with GELU (tanh), fc2 with its residual.
  void bf16_block(const DeviceBlock& b, const Pass& f, const std::vector<SeqBucket>& buckets) {
    const Activations& a = f.a;
    const int64_t p = f.p, d = f.d;
    const size_t ws = f.gemm_ws;
    const cudaStream_t s = f.s;
    check(k::layer_norm_bf16(a.x, b.norm1_w, b.norm1_b, a.normed, p, d, c.norm_eps, s), "norm1");
    check(qkv.run(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws, ws, s),
          "attn.qkv");
    attention(f, buckets);
    check(proj.run(handle, a.attn, b.proj_w, b.proj_b, a.x, a.x, p, a.gemm_ws, ws, s), "attn.proj");
    check(k::layer_norm_bf16(a.x, b.norm2_w, b.norm2_b, a.normed, p, d, c.norm_eps, s), "norm2");
    check(fc1.run(handle, a.normed, b.fc1_w, b.fc1_b, nullptr, a.act, p, a.gemm_ws, ws, s),
          "mlp.linear_fc1");
    check(fc2.run(handle, a.act, b.fc2_w, b.fc2_b, a.x, a.x, p, a.gemm_ws, ws, s),
          "mlp.linear_fc2");
  }

  // Rotary on qkv, then full attention per item into a.attn.
  void attention(const Pass& f, const std::vector<SeqBucket>& buckets) const {
    check(k::rotary_bf16(f.a.qkv, f.p, f.heads, f.hd, f.in.cos, f.in.sin, f.hd / 2, f.s), "rotary");
    for (const SeqBucket& bk : buckets)
      check(k::varlen_attention_bf16(f.a.qkv, f.in.cu_seqlens + bk.first,
                                     static_cast<int>(bk.count), static_cast<int>(bk.max_seqlen),
                                     f.heads, f.hd, f.scale, f.a.attn, f.s),
            "attention");
  }

  void tune_products(const Activations& a, int64_t p, int64_t tokens, size_t ws,
                     cudaStream_t s) override {
    const DeviceBlock& b = blocks[0];
    if (fp8) {
      // Timed on a copy of the forward's first block (its residual rows are
      // overwritten: the forward that follows recomputes them).
      Pass f{};
      f.a = a;
      f.p = p;
      f.d = c.hidden_size;
      f.s = s;
      f.gemm_ws = ws;
      fp8_block(b, f, nullptr);
    } else {
      check(qkv.tune(handle, a.normed, b.qkv_w, b.qkv_b, nullptr, a.qkv, p, a.gemm_ws, ws, s),
            "tune");
      check(proj.tune(handle, a.attn, b.proj_w, b.proj_b, a.normed, a.normed, p, a.gemm_ws, ws, s),
            "tune");
      check(fc1.tune(handle, a.normed, b.fc1_w, b.fc1_b, nullptr, a.act, p, a.gemm_ws, ws, s),
            "tune");
      check(fc2.tune(handle, a.act, b.fc2_w, b.fc2_b, a.normed, a.normed, p, a.gemm_ws, ws, s),
            "tune");
    }
    check(merge1.tune(handle, a.normed, merger.fc1_w, merger.fc1_b, nullptr, a.attn, tokens,
                      a.gemm_ws, ws, s),
          "tune");
    check(merge2.tune(handle, a.attn, merger.fc2_w, merger.fc2_b, nullptr, a.merged, tokens,
                      a.gemm_ws, ws, s),
          "tune");
  }

  // A merger over the patch rows in `x`: LayerNorm per patch (main merger) or
  // per merged token of 4 patches (use_postshuffle_norm, the deepstack ones),
  // then [tokens, 4d] -> Linear + GELU -> Linear, and the rows gathered
  // from layout order into batch order (`token_index`) into `out`.
  void run_merger(const DeviceMerger& m, bool postshuffle, const Activations& a, int64_t p,
                  int64_t tokens, const int32_t* token_index, bf16* out, size_t ws,
                  cudaStream_t s) const {
    const int64_t d = c.hidden_size, md = d * c.merge_unit();
    if (postshuffle)
      check(k::layer_norm_bf16(a.x, m.norm_w, m.norm_b, a.normed, tokens, md, c.norm_eps, s),
            "deepstack merger norm");
    else
      check(k::layer_norm_bf16(a.x, m.norm_w, m.norm_b, a.normed, p, d, c.norm_eps, s),
            "merger norm");
    check(merge1.run(handle, a.normed, m.fc1_w, m.fc1_b, nullptr, a.attn, tokens, a.gemm_ws, ws, s),
          "merger linear_fc1");
    check(merge2.run(handle, a.attn, m.fc2_w, m.fc2_b, nullptr, a.merged, tokens, a.gemm_ws, ws, s),
          "merger linear_fc2");
    check(k::gather_rows_bf16(a.merged, token_index, out, tokens, c.out_hidden_size, s),
          "output order");
  }
};

DeepstackTower::DeepstackTower(const Options& o, const Weights& w, int device_index, Warn warn)
    : CudaTower(o.model, device_index, padded_intermediate(o.model)),
      fp8(o.precision == Precision::Fp8Linear) {
  if (fp8) k::require_fp8_block(who, c.hidden_size, padded_intermediate(c), /*gelu_tanh=*/true);
  fp8_room = fp8;
  start(o, w, std::move(warn));
}

void DeepstackTower::run(const Pass& f, void* const* outputs) {
  const auto& [cap, a, in, s, p, tokens, d, heads, hd, scale, gemm_ws] = f;
  const int32_t* pos_index = in.pos_index;
  const float* pos_weight = in.pos_weight;
  const int32_t* token_index = in.token_index;

  // Patch embedding (Conv3d with stride = kernel: one product with bias),
  // then the learned positions interpolated to each item's grid.
  check(patch.run(handle, in.pixels, patch_w, patch_b, nullptr, a.x, p, a.gemm_ws, gemm_ws, s),
        "patch_embed");
  check(pos_embed_add_bf16(a.x, pos_embed, c.num_position_embeddings, pos_index, pos_weight, 4, p,
                           d, s),
        "pos_embed");
  const std::vector<SeqBucket> buckets = full_attention_buckets(cap);
  for (int64_t i = 0; i < c.depth; ++i) {
    const DeviceBlock& b = blocks[static_cast<size_t>(i)];
    if (fp8)
      fp8_block(b, f, &buckets);
    else
      bf16_block(b, f, buckets);
    // Deepstack outputs come in layer order, each from its own merger.
    const int64_t slot = c.deepstack_slot(i);
    if (slot >= 0)
      run_merger(deepstack[static_cast<size_t>(c.deepstack_merger(slot))],
                 /*postshuffle=*/true, a, p, tokens, token_index,
                 static_cast<bf16*>(outputs[1 + slot]), gemm_ws, s);
  }
  run_merger(merger, /*postshuffle=*/false, a, p, tokens, token_index,
             static_cast<bf16*>(outputs[0]), gemm_ws, s);
}

}  // namespace

std::unique_ptr<CudaModel> make_deepstack_tower(const Options& o, const Weights& w,
                                                int device_index, Warn warn) {
  return std::make_unique<DeepstackTower>(o, w, device_index, std::move(warn));
}

}  // namespace qwen_vl
