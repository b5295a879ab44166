#include "siglip_cuda_model.hpp"

#include "siglip_kernels.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/cuda/prenorm_layers.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/workspace_carver.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

namespace siglip {
namespace {

namespace k = encoder_kit::cuda;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

constexpr const char* kWho = "siglip CUDA";  // leads every error message

void check(int rc, const char* what) {
  k::throw_on_kit_failure(kWho, rc, what);
}

void check_cuda(cudaError_t e, const char* what) {
  k::throw_on_cuda_error(kWho, e, what);
}

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

  k::PreNormBuffers layers() const { return {x, normed, qkv, attn, mlp, q, q_scale, gemm_ws}; }
};

Activations carve(const VisionConfig& c, const Capacity& cap, char* base, bool fp8) {
  const size_t r = static_cast<size_t>(cap.rows), d = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.intermediate_size);
  Activations a{};
  encoder_kit::WorkspaceCarver<char> ws(base, k::kWorkspaceAlign);
  a.x = ws.take_as<bf16>(r * d);
  a.normed = ws.take_as<bf16>(r * d);
  a.qkv = ws.take_as<bf16>(3 * r * d);  // the head's k|v too
  a.attn = ws.take_as<bf16>(r * d);
  a.mlp = ws.take_as<bf16>(r * inter);
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
  k::DeviceWeights weights;  // one allocation for every parameter
  const bf16 *patch_w = nullptr, *patch_b = nullptr, *pos = nullptr;
  const bf16 *post_w = nullptr, *post_b = nullptr;
  std::optional<k::PreNormLayers> layers;  // made once the device is selected
  DeviceHead head{};
  Capacity planned;
  k::GemmPlan patch;                                  // m = patch rows
  k::GemmPlan head_kv, head_out, head_fc1, head_fc2;  // head_kv: rows; the rest: images
  bool fp8 = false;                                   // precision = "fp8_linear"
  k::ModelContext ctx{kWho};  // last member: its handle is destroyed first

  void upload(const Weights& w) {
    weights.add(&patch_w, w.patch_w);
    weights.add(&patch_b, w.patch_b);
    weights.add(&pos, w.pos);
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const std::string at = "layers." + std::to_string(i) + ".";
      layers->add(weights, w.layers[i], {at + "self_attn.qkv", at + "mlp.fc1", at + "mlp.fc2"});
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
    const auto [qkv, out, fc1, fc2] = layers->plan(rows);
    if (o.needs_head()) {
      const int64_t images = cap.images;
      check(head_kv.initialize(rows, 2 * d, d, Epilogue::Bias, false), "planning head k/v");
      check(head_out.initialize(images, d, d, Epilogue::Bias, false), "planning head out_proj");
      check(head_fc1.initialize(images, inter, d, Epilogue::BiasGeluTanh, false),
            "planning head fc1");
      check(head_fc2.initialize(images, d, inter, Epilogue::Bias, true), "planning head fc2");
    }
    ctx.planned({&patch, qkv, out, fc1, fc2, &head_kv, &head_out, &head_fc1, &head_fc2});
    planned = cap;
  }

  // Times each product's candidates at this size on scratch memory (the
  // forward that follows recomputes everything from the pixels).
  void tune(const Activations& a, const bf16* pixels, const Capacity& cap, cudaStream_t s) {
    const int64_t rows = cap.rows, images = cap.images;
    ctx.tune(patch, pixels, patch_w, patch_b, nullptr, a.x, rows, a.gemm_ws, s,
             "tuning patch_embed");
    layers->tune(ctx, a.layers(), rows, s);
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
    check(patch.prepare(cap.rows), "prepare");
    layers->prepare(cap.rows);
    if (o.needs_head()) {
      check(head_kv.prepare(cap.rows), "prepare");
      for (k::GemmPlan* p : {&head_out, &head_fc1, &head_fc2})
        check(p->prepare(cap.images), "prepare");
    }
  }

  // Attention within each image; rows past the last image are in no
  // sequence and their (unwritten) rows never mix with real ones.
  int attention(const Activations& a, const Capacity& cap, const int32_t* cu,
                cudaStream_t s) const {
    const VisionConfig& c = o.model;
    const int hd = static_cast<int>(c.head_dim());
    return k::varlen_attention_bf16(a.qkv, cu, static_cast<int>(cap.images),
                                    static_cast<int>(c.tokens_per_image()),
                                    static_cast<int>(c.num_attention_heads), hd,
                                    1.0f / std::sqrt(static_cast<float>(hd)), a.attn, s);
  }
  void pooling_head(const Activations& a, const Capacity& cap, const int32_t* cu,
                    const bf16* hidden, bf16* output, cudaStream_t s) const;
};

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
  impl_->layers.emplace(impl_->ctx, o.model.layer_form(), impl_->fp8);
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
  for (size_t i = 0; i < m.layers->size(); ++i)
    m.layers->run(
        m.ctx, i, a.layers(), rows, [&] { return m.attention(a, cap, cu, s); }, s);

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
