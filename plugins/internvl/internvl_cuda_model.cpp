#include "internvl_cuda_model.hpp"

#include "internvl_kernels.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/error.hpp>

#include <cmath>
#include <string>
#include <vector>

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

struct DeviceLayer {
  const bf16 *n1_w = nullptr, *n1_b = nullptr, *qkv_w, *qkv_b, *out_w, *out_b;
  const bf16 *n2_w = nullptr, *n2_b = nullptr, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
};

struct Activations {
  bf16 *x, *normed, *qkv, *attn, *mlp, *shuffled, *shuffled_norm, *mid;
  void* gemm_ws;
  size_t total;
};

Activations carve(const ModelConfig& c, const Capacity& cap, char* base) {
  const size_t r = static_cast<size_t>(cap.seq_rows(c)), d = static_cast<size_t>(c.hidden_size);
  const size_t out = static_cast<size_t>(cap.out_rows(c)),
               sw = static_cast<size_t>(c.shuffled_width());
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t elems) {
    char* ptr = base ? base + off : nullptr;
    off += k::align_up(elems * 2);
    return reinterpret_cast<bf16*>(ptr);
  };
  a.x = take(r * d);
  a.normed = take(r * d);
  a.qkv = take(3 * r * d);
  a.attn = take(r * d);
  a.mlp = take(r * static_cast<size_t>(c.intermediate_size));
  a.shuffled = take(out * sw);
  a.shuffled_norm = take(out * sw);
  a.mid = take(out * static_cast<size_t>(c.text_hidden_size));
  char* ws = base ? base + off : nullptr;
  off += k::align_up(k::GemmPlan::workspace_bytes());
  a.gemm_ws = ws;
  a.total = off;
  return a;
}

}  // namespace

struct CudaModel::Impl {
  Options o;
  k::DeviceWeights weights;
  const bf16 *patch_w, *patch_b, *cls, *pos, *final_w = nullptr, *final_b = nullptr;
  const bf16 *pln_w, *pln_b, *p1_w, *p1_b, *p2_w, *p2_b;
  std::vector<DeviceLayer> layers;
  Capacity planned;
  k::GemmPlan patch, qkv, out, fc1, fc2, proj1, proj2;
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  void upload(const Weights& w) {
    weights.add(&patch_w, w.patch_w);
    weights.add(&patch_b, w.patch_b);
    weights.add(&cls, w.cls);
    weights.add(&pos, w.pos);
    layers.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& l = w.layers[i];
      DeviceLayer& d = layers[i];
      weights.add(&d.n1_w, l.norm1_w);
      if (!o.model.rms_norm) weights.add(&d.n1_b, l.norm1_b);
      weights.add(&d.qkv_w, l.qkv_w);
      weights.add(&d.qkv_b, l.qkv_b);
      weights.add(&d.out_w, l.out_w);
      weights.add(&d.out_b, l.out_b);
      weights.add(&d.n2_w, l.norm2_w);
      if (!o.model.rms_norm) weights.add(&d.n2_b, l.norm2_b);
      weights.add(&d.fc1_w, l.fc1_w);
      weights.add(&d.fc1_b, l.fc1_b);
      weights.add(&d.fc2_w, l.fc2_w);
      weights.add(&d.fc2_b, l.fc2_b);
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
    const int64_t d = c.hidden_size, inter = c.intermediate_size, rows = cap.seq_rows(c);
    const int64_t outs = cap.out_rows(c), t = c.text_hidden_size;
    check(patch.initialize(cap.patch_rows(c), d, c.patch_cols(), Epilogue::Bias, false),
          "planning the patch embedding");
    check(qkv.initialize(rows, 3 * d, d, Epilogue::Bias, false), "planning q/k/v");
    check(out.initialize(rows, d, d, Epilogue::Bias, true), "planning projection_layer");
    check(fc1.initialize(rows, inter, d, Epilogue::BiasGelu, false), "planning fc1");
    check(fc2.initialize(rows, d, inter, Epilogue::Bias, true), "planning fc2");
    check(proj1.initialize(outs, t, c.shuffled_width(), Epilogue::BiasGelu, false),
          "planning linear_1");
    check(proj2.initialize(outs, t, t, Epilogue::Bias, false), "planning linear_2");
    ctx.planned({&patch, &qkv, &out, &fc1, &fc2, &proj1, &proj2});
    planned = cap;
  }

  // Times each product's candidates at this size on scratch memory (the
  // forward that follows recomputes everything from the pixels).
  void tune(const Activations& a, const bf16* pixels, const Capacity& cap, cudaStream_t s) {
    const ModelConfig& c = o.model;
    const int64_t rows = cap.seq_rows(c), outs = cap.out_rows(c);
    ctx.tune(patch, pixels, patch_w, patch_b, nullptr, a.normed, cap.patch_rows(c), a.gemm_ws, s,
             "tuning the patch embedding");
    if (!layers.empty()) {
      const DeviceLayer& l = layers[0];
      ctx.tune(qkv, a.normed, l.qkv_w, l.qkv_b, nullptr, a.qkv, rows, a.gemm_ws, s, "tuning q/k/v");
      ctx.tune(out, a.attn, l.out_w, l.out_b, a.x, a.x, rows, a.gemm_ws, s,
               "tuning projection_layer");
      ctx.tune(fc1, a.normed, l.fc1_w, l.fc1_b, nullptr, a.mlp, rows, a.gemm_ws, s, "tuning fc1");
      ctx.tune(fc2, a.mlp, l.fc2_w, l.fc2_b, a.x, a.x, rows, a.gemm_ws, s, "tuning fc2");
    }
    ctx.tune(proj1, a.shuffled_norm, p1_w, p1_b, nullptr, a.mid, outs, a.gemm_ws, s,
             "tuning linear_1");
    ctx.tune(proj2, a.mid, p2_w, p2_b, nullptr, a.shuffled, outs, a.gemm_ws, s, "tuning linear_2");
  }

  void prepare(const Capacity& cap) {
    const ModelConfig& c = o.model;
    check(patch.prepare(cap.patch_rows(c)), "prepare");
    for (k::GemmPlan* p : {&qkv, &out, &fc1, &fc2}) check(p->prepare(cap.seq_rows(c)), "prepare");
    for (k::GemmPlan* p : {&proj1, &proj2}) check(p->prepare(cap.out_rows(c)), "prepare");
  }

  void norm(const bf16* x, const bf16* w, const bf16* b, bf16* y, int64_t rows, cudaStream_t s,
            const char* what) const {
    const ModelConfig& c = o.model;
    check(c.rms_norm ? k::rms_norm_bf16(x, w, y, rows, c.hidden_size, c.layer_norm_eps, s)
                     : k::layer_norm_bf16(x, w, b, y, rows, c.hidden_size, c.layer_norm_eps, s),
          what);
  }

  // x += lambda_1 attn(norm1(x)); x += lambda_2 mlp(norm2(x)): the scales are
  // in the weights, the residual adds fused into the products.
  void layer(const DeviceLayer& l, const Activations& a, const Capacity& cap, const int32_t* cu,
             cudaStream_t s) const {
    const ModelConfig& c = o.model;
    const int64_t rows = cap.seq_rows(c);
    const int hd = static_cast<int>(c.head_dim());
    norm(a.x, l.n1_w, l.n1_b, a.normed, rows, s, "layernorm_before");
    ctx.run(qkv, a.normed, l.qkv_w, l.qkv_b, nullptr, a.qkv, rows, a.gemm_ws, s, "q/k/v");
    // Each tile attends to itself; padded tiles are empty sequences whose rows
    // are never read by a real one.
    check(k::varlen_attention_bf16(a.qkv, cu, static_cast<int>(cap.tiles),
                                   static_cast<int>(c.seq_per_tile()),
                                   static_cast<int>(c.num_attention_heads), hd,
                                   1.0f / std::sqrt(static_cast<float>(hd)), a.attn, s),
          "attention");
    ctx.run(out, a.attn, l.out_w, l.out_b, a.x, a.x, rows, a.gemm_ws, s, "projection_layer");
    norm(a.x, l.n2_w, l.n2_b, a.normed, rows, s, "layernorm_after");
    ctx.run(fc1, a.normed, l.fc1_w, l.fc1_b, nullptr, a.mlp, rows, a.gemm_ws, s, "fc1 + gelu");
    ctx.run(fc2, a.mlp, l.fc2_w, l.fc2_b, a.x, a.x, rows, a.gemm_ws, s, "fc2");
  }
};

CudaModel::CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
                     const std::string& tuning_cache, std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = o;
  const ModelConfig& c = o.model;
  impl_->ctx.select_device(device_index);
  if (c.head_dim() % 8 != 0 || c.head_dim() > 128)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "internvl CUDA: the attention kernel needs head_dim a multiple of 8 up to "
                      "128, got " +
                          std::to_string(c.head_dim()));
  if (c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0 || c.text_hidden_size % 8 != 0)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "internvl CUDA: hidden_size, intermediate_size and text_hidden_size must "
                      "be multiples of 8 (16-byte bf16 rows)");
  if (c.use_qk_norm)
    encoder_kit::fail(EG_ERR_UNSUPPORTED,
                      "internvl CUDA: use_qk_norm (InternViT-6B) runs on the CPU path only; use "
                      "device = \"cpu\"");
  impl_->upload(w);
  impl_->ctx.open(device_index, tuning_cache, "internvl", std::move(warn));
  impl_->plan_products(max);
}

CudaModel::~CudaModel() = default;

size_t CudaModel::workspace_bytes(const Capacity& cap) const {
  return carve(impl_->o.model, cap, nullptr).total;
}

void CudaModel::forward(const Capacity& cap, const eg_tensor* buffers, void* output,
                        void* workspace, size_t workspace_bytes, void* stream, bool tune) {
  Impl& m = *impl_;
  const ModelConfig& c = m.o.model;
  auto s = static_cast<cudaStream_t>(stream);
  const Activations a = carve(c, cap, static_cast<char*>(workspace));
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
  for (const DeviceLayer& l : m.layers) m.layer(l, a, cap, cu, s);
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
