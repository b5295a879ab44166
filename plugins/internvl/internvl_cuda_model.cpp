#include "internvl_cuda_model.hpp"

#include "internvl_kernels.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/cuda/prenorm_layers.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/workspace_carver.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace internvl {
namespace {

namespace k = encoder_kit::cuda;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

constexpr const char* kWho = "internvl CUDA";
constexpr float kProjectorEps = 1e-5f;  // nn.LayerNorm's default, not the config's

void check(int rc, const char* what) {
  k::throw_on_kit_failure(kWho, rc, what);
}

struct Activations {
  bf16 *x, *normed, *qkv, *attn, *mlp, *shuffled, *shuffled_norm, *mid;
  uint8_t* q;  // fp8: a product's operand as e4m3 codes [rows, max(d, inter)]
  float* q_scale;
  void* gemm_ws;
  size_t total;

  k::PreNormBuffers layers() const { return {x, normed, qkv, attn, mlp, q, q_scale, gemm_ws}; }
};

Activations carve(const ModelConfig& c, const Capacity& cap, char* base, bool fp8) {
  const size_t r = static_cast<size_t>(cap.seq_rows(c)), d = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
  const size_t out = static_cast<size_t>(cap.out_rows(c)),
               sw = static_cast<size_t>(c.shuffled_width());
  Activations a{};
  encoder_kit::WorkspaceCarver<char> ws(base, k::kWorkspaceAlign);
  a.x = ws.take_as<bf16>(r * d);
  a.normed = ws.take_as<bf16>(r * d);
  a.qkv = ws.take_as<bf16>(3 * r * d);
  a.attn = ws.take_as<bf16>(r * d);
  a.mlp = ws.take_as<bf16>(r * inter);
  a.shuffled = ws.take_as<bf16>(out * sw);
  a.shuffled_norm = ws.take_as<bf16>(out * sw);
  a.mid = ws.take_as<bf16>(out * static_cast<size_t>(c.text_hidden_size));
  if (fp8) {
    a.q = ws.take_as<uint8_t>(r * std::max(d, inter));
    a.q_scale = ws.take_as<float>(r);
  }
  a.gemm_ws = ws.take(k::GemmPlan::workspace_bytes());
  a.total = ws.size();
  return a;
}

}  // namespace

struct CudaModel::Impl {
  Options o;
  k::DeviceWeights weights;
  const bf16 *patch_w, *patch_b, *cls, *pos, *final_w = nullptr, *final_b = nullptr;
  const bf16 *pln_w, *pln_b, *p1_w, *p1_b, *p2_w, *p2_b;
  std::optional<k::PreNormLayers> layers;  // made once the device is selected
  Capacity planned;
  k::GemmPlan patch, proj1, proj2;
  bool fp8 = false;           // precision = "fp8_linear"
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  void upload(const Weights& w) {
    weights.add(&patch_w, w.patch_w);
    weights.add(&patch_b, w.patch_b);
    weights.add(&cls, w.cls);
    weights.add(&pos, w.pos);
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const std::string at = "vision_tower.encoder.layer." + std::to_string(i) + ".";
      layers->add(weights, w.layers[i], {at + "attention.qkv", at + "mlp.fc1", at + "mlp.fc2"});
    }
    if (o.model.uses_final_layernorm()) {
      weights.add(&final_w, w.final_w);
      weights.add(&final_b, w.final_b);
    }
    weights.add(&pln_w, w.proj_ln_w);
    weights.add(&pln_b, w.proj_ln_b);
    weights.add(&p1_w, w.proj1_w);
    weights.add(&p1_b, w.proj1_b);
    weights.add(&p2_w, w.proj2_w);
    weights.add(&p2_b, w.proj2_b);
    weights.upload(kWho);
  }

  void plan_products(const Capacity& cap) {
    const ModelConfig& c = o.model;
    const int64_t d = c.hidden_size, rows = cap.seq_rows(c);
    const int64_t outs = cap.out_rows(c), t = c.text_hidden_size;
    check(patch.initialize(cap.patch_rows(c), d, c.patch_cols(), Epilogue::Bias, false),
          "planning the patch embedding");
    const auto [qkv, out, fc1, fc2] = layers->plan(rows);
    check(proj1.initialize(outs, t, c.shuffled_width(), Epilogue::BiasGelu, false),
          "planning linear_1");
    check(proj2.initialize(outs, t, t, Epilogue::Bias, false), "planning linear_2");
    ctx.planned({&patch, qkv, out, fc1, fc2, &proj1, &proj2});
    planned = cap;
  }

  // Times each product's candidates at this size on scratch memory (the
  // forward that follows recomputes everything from the pixels).
  void tune(const Activations& a, const bf16* pixels, const Capacity& cap, cudaStream_t s) {
    const ModelConfig& c = o.model;
    const int64_t rows = cap.seq_rows(c), outs = cap.out_rows(c);
    ctx.tune(patch, pixels, patch_w, patch_b, nullptr, a.normed, cap.patch_rows(c), a.gemm_ws, s,
             "tuning the patch embedding");
    layers->tune(ctx, a.layers(), rows, s);
    ctx.tune(proj1, a.shuffled_norm, p1_w, p1_b, nullptr, a.mid, outs, a.gemm_ws, s,
             "tuning linear_1");
    ctx.tune(proj2, a.mid, p2_w, p2_b, nullptr, a.shuffled, outs, a.gemm_ws, s, "tuning linear_2");
  }

  void prepare(const Capacity& cap) {
    const ModelConfig& c = o.model;
    check(patch.prepare(cap.patch_rows(c)), "prepare");
    layers->prepare(cap.seq_rows(c));
    for (k::GemmPlan* p : {&proj1, &proj2}) check(p->prepare(cap.out_rows(c)), "prepare");
  }

  // Each tile attends to itself; padded tiles are empty sequences whose rows
  // are never read by a real one.
  int attention(const Activations& a, const Capacity& cap, const int32_t* cu,
                cudaStream_t s) const {
    const ModelConfig& c = o.model;
    const int hd = static_cast<int>(c.head_dim());
    return k::varlen_attention_bf16(a.qkv, cu, static_cast<int>(cap.tiles),
                                    static_cast<int>(c.seq_per_tile()),
                                    static_cast<int>(c.num_attention_heads), hd,
                                    1.0f / std::sqrt(static_cast<float>(hd)), a.attn, s);
  }
};

CudaModel::CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
                     const std::string& tuning_cache, std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = o;
  impl_->fp8 = o.precision == encoder_kit::Precision::Fp8Linear;
  const ModelConfig& c = o.model;
  impl_->ctx.select_device(device_index);
  if (c.text_hidden_size % 8 != 0)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "internvl CUDA: text_hidden_size must be a multiple of 8 (16-byte bf16 "
                      "rows), got " +
                          std::to_string(c.text_hidden_size));
  if (c.use_qk_norm)
    encoder_kit::fail(EG_ERR_UNSUPPORTED,
                      "internvl CUDA: use_qk_norm (InternViT-6B) runs on the CPU path only; use "
                      "device = \"cpu\"");
  impl_->layers.emplace(impl_->ctx, c.layer_form(), impl_->fp8);
  impl_->upload(w);
  impl_->ctx.open(device_index, tuning_cache, "internvl", std::move(warn));
  impl_->plan_products(max);
}

CudaModel::~CudaModel() = default;

size_t CudaModel::workspace_bytes(const Capacity& cap) const {
  return carve(impl_->o.model, cap, nullptr, impl_->fp8).total;
}

void CudaModel::forward(const Capacity& cap, const eg_tensor* buffers, void* output,
                        void* workspace, size_t workspace_bytes, void* stream, bool tune) {
  Impl& m = *impl_;
  const ModelConfig& c = m.o.model;
  auto s = static_cast<cudaStream_t>(stream);
  const Activations a = carve(c, cap, static_cast<char*>(workspace), m.fp8);
  m.ctx.check_workspace(a.total, workspace_bytes);
  const auto* pixels = static_cast<const bf16*>(buffers[kPixelRows].data);
  const auto* cu = static_cast<const int32_t*>(buffers[kCuSeqlens].data);

  const bool in_capture = m.ctx.capturing(s);
  if (cap.tiles > m.planned.tiles)
    m.ctx.grow_plan(in_capture, cap.tiles, "tiles", [&] { m.plan_products(cap); });
  m.ctx.tune_once(tune, in_capture, cap.tiles, [&] { m.tune(a, pixels, cap, s); });
  if (!in_capture) m.prepare(cap);

  const int64_t d = c.hidden_size, rows = cap.seq_rows(c), outs = cap.out_rows(c);
  m.ctx.run(m.patch, pixels, m.patch_w, m.patch_b, nullptr, a.normed, cap.patch_rows(c), a.gemm_ws,
            s, "patch_embeddings");
  check(cuda::embed_tiles_bf16(a.normed, m.cls, m.pos, a.x, cap.tiles, c.patches_per_tile(), d, s),
        "cls token and position_embeddings");
  for (size_t i = 0; i < m.layers->size(); ++i)
    m.layers->run(
        m.ctx, i, a.layers(), rows, [&] { return m.attention(a, cap, cu, s); }, s);
  const bf16* features = a.x;
  if (c.uses_final_layernorm()) {
    check(k::layer_norm_bf16(a.x, m.final_w, m.final_b, a.normed, rows, d, c.layer_norm_eps, s),
          "layernorm");
    features = a.normed;
  }
  check(cuda::pixel_shuffle_bf16(features, a.shuffled, cap.tiles, c.grid(), c.shuffle, d, s),
        "pixel_shuffle");
  check(k::layer_norm_bf16(a.shuffled, m.pln_w, m.pln_b, a.shuffled_norm, outs, c.shuffled_width(),
                           kProjectorEps, s),
        "projector layer_norm");
  m.ctx.run(m.proj1, a.shuffled_norm, m.p1_w, m.p1_b, nullptr, a.mid, outs, a.gemm_ws, s,
            "linear_1 + gelu");
  m.ctx.run(m.proj2, a.mid, m.p2_w, m.p2_b, nullptr, static_cast<bf16*>(output), outs, a.gemm_ws, s,
            "linear_2");
}

}  // namespace internvl
