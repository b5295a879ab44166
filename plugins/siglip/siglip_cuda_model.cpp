#include "siglip_cuda_model.hpp"

#include "siglip_kernels.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/fp8_block.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/error.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace siglip {
namespace {

namespace k = encoder_kit::cuda;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

using k::align_up;

constexpr const char* kWho = "siglip CUDA";  // leads every error message

void check(int rc, const char* what) {
  k::throw_on_kit_failure(kWho, rc, what);
}

void check_cuda(cudaError_t e, const char* what) {
  k::throw_on_cuda_error(kWho, e, what);
}

struct DeviceLayer {
  const bf16 *ln1_w, *ln1_b, *qkv_w, *qkv_b, *out_w, *out_b;
  const bf16 *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
  // precision = "fp8_linear": the layer for the kit's FP8 block (q/k/v, fc1
  // and fc2 as e4m3 codes, the norms folded into them; out_proj bf16); the
  // bf16 norms and weights above are then not uploaded.
  k::Fp8BlockWeights fp8;
};

struct DeviceHead {
  const bf16 *query, *kv_w, *kv_b, *out_w, *out_b, *ln_w, *ln_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
};

// Activations of one forward, carved from the runtime's workspace.
struct Activations {
  bf16 *x, *normed, *qkv, *attn, *mlp;
  uint8_t* q;  // fp8: a product's operand as e4m3 codes [rows, max(d, inter)]
  float* q_scale;
  void* gemm_ws;
  size_t total;
};

Activations carve(const VisionConfig& c, const Capacity& cap, char* base, bool fp8) {
  const size_t r = static_cast<size_t>(cap.rows), d = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
  Activations a{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    char* ptr = base ? base + off : nullptr;
    off += align_up(bytes);
    return ptr;
  };
  a.x = reinterpret_cast<bf16*>(take(r * d * 2));
  a.normed = reinterpret_cast<bf16*>(take(r * d * 2));
  a.qkv = reinterpret_cast<bf16*>(take(3 * r * d * 2));  // the head's k|v too
  a.attn = reinterpret_cast<bf16*>(take(r * d * 2));
  a.mlp = reinterpret_cast<bf16*>(take(r * inter * 2));
  if (fp8) {
    a.q = reinterpret_cast<uint8_t*>(take(r * std::max(d, inter)));
    a.q_scale = reinterpret_cast<float*>(take(r * 4));
  }
  a.gemm_ws = take(k::GemmPlan::workspace_bytes());
  a.total = off;
  return a;
}

}  // namespace

struct CudaModel::Impl {
  Options o;
  k::DeviceWeights weights;  // one allocation for every parameter
  const bf16 *patch_w = nullptr, *patch_b = nullptr, *pos = nullptr;
  const bf16 *post_w = nullptr, *post_b = nullptr;
  std::vector<DeviceLayer> layers;
  DeviceHead head{};
  Capacity planned;
  k::GemmPlan patch, qkv, out, fc1, fc2;              // m = patch rows
  k::GemmPlan head_kv, head_out, head_fc1, head_fc2;  // head_kv: rows; the rest: images
  bool fp8 = false;                                   // precision = "fp8_linear"
  k::Fp8PreNormBlock block8;
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  void upload(const Weights& w) {
    weights.add(&patch_w, w.patch_w);
    weights.add(&patch_b, w.patch_b);
    weights.add(&pos, w.pos);
    layers.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& l = w.layers[i];
      DeviceLayer& d = layers[i];
      const int64_t dm = o.model.hidden_size;
      if (fp8) {
        const std::string at = "layers." + std::to_string(i) + ".";
        k::add_fp8_block(weights, d.fp8,
                         {l.ln1_w, l.ln1_b, l.qkv_w, l.qkv_b, l.out_w, l.out_b, l.ln2_w, l.ln2_b,
                          l.fc1_w, l.fc1_b, l.fc2_w, l.fc2_b},
                         dm, {at + "self_attn.qkv", at + "mlp.fc1", at + "mlp.fc2"});
        continue;
      }
      weights.add(&d.ln1_w, l.ln1_w);
      weights.add(&d.ln1_b, l.ln1_b);
      weights.add(&d.qkv_b, l.qkv_b);
      weights.add(&d.out_b, l.out_b);
      weights.add(&d.ln2_w, l.ln2_w);
      weights.add(&d.ln2_b, l.ln2_b);
      weights.add(&d.fc1_b, l.fc1_b);
      weights.add(&d.fc2_b, l.fc2_b);
      weights.add(&d.qkv_w, l.qkv_w);
      weights.add(&d.out_w, l.out_w);
      weights.add(&d.fc1_w, l.fc1_w);
      weights.add(&d.fc2_w, l.fc2_w);
    }
    if (o.uses_post_layernorm()) {
      weights.add(&post_w, w.post_ln_w);
      weights.add(&post_b, w.post_ln_b);
    }
    if (o.needs_head()) {
      const HeadWeights& h = w.head;
      for (auto [dst, src] : {std::pair{&head.query, &h.query},
                              {&head.kv_w, &h.kv_w},
                              {&head.kv_b, &h.kv_b},
                              {&head.out_w, &h.out_w},
                              {&head.out_b, &h.out_b},
                              {&head.ln_w, &h.ln_w},
                              {&head.ln_b, &h.ln_b},
                              {&head.fc1_w, &h.fc1_w},
                              {&head.fc1_b, &h.fc1_b},
                              {&head.fc2_w, &h.fc2_w},
                              {&head.fc2_b, &h.fc2_b}})
        weights.add(dst, *src);
    }
    weights.upload(kWho);
  }

  void plan_products(const Capacity& cap) {
    const VisionConfig& c = o.model;
    const int64_t d = c.hidden_size, inter = c.intermediate_size, rows = cap.rows;
    check(patch.initialize(rows, d, c.patch_cols(), Epilogue::Bias, false), "planning patch_embed");
    check(qkv.initialize(rows, 3 * d, d, Epilogue::Bias, false), "planning q/k/v");
    check(out.initialize(rows, d, d, Epilogue::Bias, true), "planning out_proj");
    check(fc1.initialize(rows, inter, d, Epilogue::BiasGeluTanh, false), "planning fc1");
    check(fc2.initialize(rows, d, inter, Epilogue::Bias, true), "planning fc2");
    if (fp8)  // the layers' products as they run (the bf16 plans above stay idle)
      check(block8.initialize(rows, d, inter, c.layer_norm_eps), "planning the layers in FP8");
    if (o.needs_head()) {
      const int64_t images = cap.images;
      check(head_kv.initialize(rows, 2 * d, d, Epilogue::Bias, false), "planning head k/v");
      check(head_out.initialize(images, d, d, Epilogue::Bias, false), "planning head out_proj");
      check(head_fc1.initialize(images, inter, d, Epilogue::BiasGeluTanh, false),
            "planning head fc1");
      check(head_fc2.initialize(images, d, inter, Epilogue::Bias, true), "planning head fc2");
    }
    ctx.planned({&patch, &qkv, &out, &fc1, &fc2, &head_kv, &head_out, &head_fc1, &head_fc2});
    planned = cap;
  }

  // Times each product's candidates at this size on scratch memory (the
  // forward that follows recomputes everything from the pixels).
  void tune(const Activations& a, const bf16* pixels, const Capacity& cap, cudaStream_t s) {
    const int64_t rows = cap.rows, images = cap.images;
    ctx.tune(patch, pixels, patch_w, patch_b, nullptr, a.x, rows, a.gemm_ws, s,
             "tuning patch_embed");
    if (!layers.empty() && fp8) {
      // Timed on the first layer's weights (x is overwritten: the forward
      // that follows recomputes it).
      layer(layers[0], a, cap, nullptr, s, /*tune=*/true);
    } else if (!layers.empty()) {
      const DeviceLayer& l = layers[0];
      ctx.tune(qkv, a.normed, l.qkv_w, l.qkv_b, nullptr, a.qkv, rows, a.gemm_ws, s, "tuning q/k/v");
      ctx.tune(out, a.attn, l.out_w, l.out_b, a.x, a.x, rows, a.gemm_ws, s, "tuning out_proj");
      ctx.tune(fc1, a.normed, l.fc1_w, l.fc1_b, nullptr, a.mlp, rows, a.gemm_ws, s, "tuning fc1");
      ctx.tune(fc2, a.mlp, l.fc2_w, l.fc2_b, a.x, a.x, rows, a.gemm_ws, s, "tuning fc2");
    }
    if (o.needs_head()) {
      ctx.tune(head_kv, a.normed, head.kv_w, head.kv_b, nullptr, a.qkv, rows, a.gemm_ws, s,
               "tuning head k/v");
      ctx.tune(head_out, a.attn, head.out_w, head.out_b, nullptr, a.normed, images, a.gemm_ws, s,
               "tuning head out_proj");
      ctx.tune(head_fc1, a.attn, head.fc1_w, head.fc1_b, nullptr, a.mlp, images, a.gemm_ws, s,
               "tuning head fc1");
      ctx.tune(head_fc2, a.mlp, head.fc2_w, head.fc2_b, a.normed, a.attn, images, a.gemm_ws, s,
               "tuning head fc2");
    }
  }

  // Algorithm choice for this size, ahead of the capture (a host-side query).
  void prepare(const Capacity& cap) {
    for (k::GemmPlan* p : {&patch, &qkv, &out, &fc1, &fc2}) check(p->prepare(cap.rows), "prepare");
    if (o.needs_head()) {
      check(head_kv.prepare(cap.rows), "prepare");
      for (k::GemmPlan* p : {&head_out, &head_fc1, &head_fc2})
        check(p->prepare(cap.images), "prepare");
    }
  }

  // tune (fp8 only): the FP8 block's products timed instead of run.
  void layer(const DeviceLayer& l, const Activations& a, const Capacity& cap, const int32_t* cu,
             cudaStream_t s, bool tune = false);
  void pooling_head(const Activations& a, const Capacity& cap, const int32_t* cu,
                    const bf16* hidden, bf16* output, cudaStream_t s) const;
};

// x += attn(ln1(x)); x += mlp(ln2(x)), the residual adds fused into the products.
void CudaModel::Impl::layer(const DeviceLayer& l, const Activations& a, const Capacity& cap,
                            const int32_t* cu, cudaStream_t s, bool tune) {
  const VisionConfig& c = o.model;
  const int64_t rows = cap.rows, d = c.hidden_size;
  const int hd = static_cast<int>(c.head_dim());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Attention stays within each image; rows past the last image are in no
  // sequence and their (unwritten) rows never mix with real ones.
  auto attention = [&] {
    return k::varlen_attention_bf16(a.qkv, cu, static_cast<int>(cap.images),
                                    static_cast<int>(c.tokens_per_image()),
                                    static_cast<int>(c.num_attention_heads), hd, scale, a.attn, s);
  };
  if (fp8) {
    std::string what;
    const int rc =
        block8.run(ctx.handle(), l.fp8, out, {a.x, a.qkv, a.attn, a.mlp, a.q, a.q_scale, a.gemm_ws},
                   rows, attention, tune, s, what);
    check(rc, what.c_str());
    return;
  }
  check(k::layer_norm_bf16(a.x, l.ln1_w, l.ln1_b, a.normed, rows, d, c.layer_norm_eps, s),
        "layer_norm1");
  ctx.run(qkv, a.normed, l.qkv_w, l.qkv_b, nullptr, a.qkv, rows, a.gemm_ws, s, "q/k/v");
  check(attention(), "attention");
  ctx.run(out, a.attn, l.out_w, l.out_b, a.x, a.x, rows, a.gemm_ws, s, "out_proj");
  check(k::layer_norm_bf16(a.x, l.ln2_w, l.ln2_b, a.normed, rows, d, c.layer_norm_eps, s),
        "layer_norm2");
  ctx.run(fc1, a.normed, l.fc1_w, l.fc1_b, nullptr, a.mlp, rows, a.gemm_ws, s, "fc1 + gelu");
  ctx.run(fc2, a.mlp, l.fc2_w, l.fc2_b, a.x, a.x, rows, a.gemm_ws, s, "fc2");
}

// SiglipMultiheadAttentionPoolingHead on the post-layernorm hidden states
// (a.normed, or the last_hidden_state output); one output row per image.
// Buffers are reused once their contents are consumed; `hidden` is only read.
void CudaModel::Impl::pooling_head(const Activations& a, const Capacity& cap, const int32_t* cu,
                                   const bf16* hidden, bf16* output, cudaStream_t s) const {
  const VisionConfig& c = o.model;
  const int64_t rows = cap.rows, images = cap.images, d = c.hidden_size;
  const int hd = static_cast<int>(c.head_dim());
  ctx.run(head_kv, hidden, head.kv_w, head.kv_b, nullptr, a.qkv, rows, a.gemm_ws, s, "head k/v");
  check(cuda::probe_attention_bf16(head.query, a.qkv, cu, static_cast<int>(images),
                                   static_cast<int>(c.tokens_per_image()),
                                   static_cast<int>(c.num_attention_heads), hd,
                                   1.0f / std::sqrt(static_cast<float>(hd)), a.attn, s),
        "head attention");
  bf16* pooled = a.normed;  // [images, d]
  ctx.run(head_out, a.attn, head.out_w, head.out_b, nullptr, pooled, images, a.gemm_ws, s,
          "head out_proj");
  check(k::layer_norm_bf16(pooled, head.ln_w, head.ln_b, a.attn, images, d, c.layer_norm_eps, s),
        "head layernorm");
  ctx.run(head_fc1, a.attn, head.fc1_w, head.fc1_b, nullptr, a.mlp, images, a.gemm_ws, s,
          "head fc1 + gelu");
  ctx.run(head_fc2, a.mlp, head.fc2_w, head.fc2_b, pooled, output, images, a.gemm_ws, s,
          "head fc2");
}

CudaModel::CudaModel(const Options& o, const Weights& w, int device_index, const Capacity& max,
                     const std::string& tuning_cache, std::function<void(const std::string&)> warn)
    : impl_(std::make_unique<Impl>()) {
  impl_->o = o;
  impl_->fp8 = o.precision == encoder_kit::Precision::Fp8Linear;
  impl_->ctx.select_device(device_index);
  const int64_t hd = o.model.head_dim();
  if (hd % 8 != 0 || hd > 128)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,  // a config the user can change: exit 2
        "siglip CUDA: the attention kernel needs head_dim a multiple of 8 up to 128, got " +
            std::to_string(hd));
  if (o.model.hidden_size % 8 != 0 || o.model.intermediate_size % 8 != 0)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,  // a config the user can change: exit 2
                      "siglip CUDA: hidden_size and intermediate_size must be multiples of 8 "
                      "(16-byte bf16 rows)");
  if (impl_->fp8) k::require_fp8_block(kWho, o.model.hidden_size, o.model.intermediate_size);
  impl_->upload(w);
  impl_->ctx.open(device_index, tuning_cache, "siglip", std::move(warn));
  impl_->plan_products(max);
}

CudaModel::~CudaModel() = default;

size_t CudaModel::workspace_bytes(const Capacity& cap) const {
  return carve(impl_->o.model, cap, nullptr, impl_->fp8).total;
}

void CudaModel::forward(const Capacity& cap, const eg_tensor* buffers, const OutputPtrs& outputs,
                        void* workspace, size_t workspace_bytes, void* stream, bool tune) {
  Impl& m = *impl_;
  const VisionConfig& c = m.o.model;
  auto s = static_cast<cudaStream_t>(stream);
  const Activations a = carve(c, cap, static_cast<char*>(workspace), m.fp8);
  m.ctx.check_workspace(a.total, workspace_bytes);
  const int64_t rows = cap.rows, d = c.hidden_size;
  const auto* pixels = static_cast<const bf16*>(buffers[kPixelRows].data);
  const auto* cu = static_cast<const int32_t*>(buffers[kCuSeqlens].data);
  auto* hidden_out = static_cast<bf16*>(outputs.last_hidden_state);
  auto* pooled_out = static_cast<bf16*>(outputs.pooled);

  const bool in_capture = m.ctx.capturing(s);
  if (rows > m.planned.rows || cap.images > m.planned.images)
    m.ctx.grow_plan(in_capture, rows, "rows", [&] { m.plan_products(cap); });
  m.ctx.tune_once(tune, in_capture, rows, [&] { m.tune(a, pixels, cap, s); });
  if (!in_capture) m.prepare(cap);

  m.ctx.run(m.patch, pixels, m.patch_w, m.patch_b, nullptr, a.x, rows, a.gemm_ws, s,
            "patch_embedding");
  check(cuda::add_periodic_rows_bf16(a.x, m.pos, rows, d, c.tokens_per_image(), s),
        "position_embedding");
  for (const DeviceLayer& l : m.layers) m.layer(l, a, cap, cu, s);

  // The last hidden state goes straight into its output when one is asked
  // for; the pooling head then reads it from there.
  bf16* hidden = hidden_out ? hidden_out : a.normed;
  if (m.o.uses_post_layernorm()) {
    check(k::layer_norm_bf16(a.x, m.post_w, m.post_b, hidden, rows, d, c.layer_norm_eps, s),
          "post_layernorm");
  } else {  // a feature layer: the residual stream as it is
    check_cuda(cudaMemcpyAsync(hidden, a.x, static_cast<size_t>(rows * d) * 2,
                               cudaMemcpyDeviceToDevice, s),
               "copying the feature layer");
  }
  if (pooled_out) m.pooling_head(a, cap, cu, hidden, pooled_out, s);
}

}  // namespace siglip
