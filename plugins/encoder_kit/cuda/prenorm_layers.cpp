#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/prenorm_layers.hpp>
#include <encoder_kit/error.hpp>

namespace encoder_kit::cuda {

PreNormLayers::PreNormLayers(const ModelContext& ctx, const PreNormForm& form, bool fp8)
    : who_(ctx.who()), form_(form), fp8_(fp8) {
  const int64_t hd = form.head_dim();
  if (hd % 8 != 0 || hd > 128)
    fail(EG_ERR_INVALID_ARGUMENT,  // a config the user can change: exit 2
         ctx.who() + ": the attention kernel needs head_dim a multiple of 8 up to 128, got " +
             std::to_string(hd));
  if (form.d % 8 != 0 || form.inter % 8 != 0)
    fail(EG_ERR_INVALID_ARGUMENT, ctx.who() +
                                      ": hidden_size and intermediate_size must be multiples "
                                      "of 8 (16-byte bf16 rows)");
  if (!fp8) return;
  if (form.rms_norm)
    fail(EG_ERR_INVALID_ARGUMENT, ctx.who() +
                                      ": precision = \"fp8_linear\" needs LayerNorm (the RMSNorm "
                                      "form runs in bf16): set precision = \"bf16\"");
  require_fp8_block(ctx.who(), form.d, form.inter, form.gelu_tanh);
}

void PreNormLayers::add(DeviceWeights& weights, const PreNormLayerWeights& l,
                        const std::array<std::string, 3>& names) {
  Layer& d = layers_.emplace_back();
  if (fp8_) {
    add_fp8_block(weights, d.fp8,
                  {l.norm1_w, l.norm1_b, l.qkv_w, l.qkv_b, l.proj_w, l.proj_b, l.norm2_w, l.norm2_b,
                   l.fc1_w, l.fc1_b, l.fc2_w, l.fc2_b},
                  form_.d, names);
    return;
  }
  weights.add(&d.n1_w, l.norm1_w);
  weights.add(&d.n2_w, l.norm2_w);
  if (!form_.rms_norm) {
    weights.add(&d.n1_b, l.norm1_b);
    weights.add(&d.n2_b, l.norm2_b);
  }
  for (auto [dst, src] : {std::pair{&d.qkv_w, &l.qkv_w},
                          {&d.qkv_b, &l.qkv_b},
                          {&d.proj_w, &l.proj_w},
                          {&d.proj_b, &l.proj_b},
                          {&d.fc1_w, &l.fc1_w},
                          {&d.fc1_b, &l.fc1_b},
                          {&d.fc2_w, &l.fc2_w},
                          {&d.fc2_b, &l.fc2_b}})
    weights.add(dst, *src);
}

std::array<GemmPlan*, 4> PreNormLayers::plan(int64_t rows) {
  using Ep = GemmPlan::Epilogue;
  const int64_t d = form_.d, inter = form_.inter;
  auto check = [&](int rc, const char* what) { throw_on_kit_failure(who_.c_str(), rc, what); };
  check(proj_.initialize(rows, d, d, Ep::Bias, true), "planning the layers' attention projection");
  if (fp8_) {  // qkv, fc1 and fc2 run in FP8: their bf16 plans stay empty
    check(block8_.initialize(rows, d, inter, form_.eps, form_.gelu_tanh),
          "planning the layers in FP8");
    return {&qkv_, &proj_, &fc1_, &fc2_};
  }
  check(qkv_.initialize(rows, 3 * d, d, Ep::Bias, false), "planning the layers' q/k/v");
  check(fc1_.initialize(rows, inter, d, form_.gelu_tanh ? Ep::BiasGeluTanh : Ep::BiasGelu, false),
        "planning the layers' fc1");
  check(fc2_.initialize(rows, d, inter, Ep::Bias, true), "planning the layers' fc2");
  return {&qkv_, &proj_, &fc1_, &fc2_};
}

void PreNormLayers::prepare(int64_t rows) {
  if (fp8_)
    return throw_on_kit_failure(who_.c_str(), proj_.prepare(rows),
                                "preparing the layers' products");
  for (GemmPlan* p : {&qkv_, &proj_, &fc1_, &fc2_})
    throw_on_kit_failure(who_.c_str(), p->prepare(rows), "preparing the layers' products");
}

void PreNormLayers::norm(const ModelContext& ctx, const bf16* w, const bf16* b,
                         const PreNormBuffers& buf, int64_t rows, cudaStream_t s,
                         const char* what) const {
  ctx.check(form_.rms_norm ? rms_norm_bf16(buf.x, w, buf.normed, rows, form_.d, form_.eps, s)
                           : layer_norm_bf16(buf.x, w, b, buf.normed, rows, form_.d, form_.eps, s),
            what);
}

// x += proj(attention(qkv(norm1(x)))); x += fc2(gelu(fc1(norm2(x)))), the
// residual adds fused into the products. attention null: the products timed
// instead (tune).
void PreNormLayers::bf16_layer(const ModelContext& ctx, const Layer& l, const PreNormBuffers& b,
                               int64_t rows, const std::function<int()>* attention,
                               cudaStream_t s) {
  auto product = [&](GemmPlan& p, const bf16* A, const bf16* W, const bf16* bias,
                     const bf16* residual, bf16* C, const char* what) {
    if (attention)
      ctx.run(p, A, W, bias, residual, C, rows, b.gemm_ws, s, what);
    else
      ctx.tune(p, A, W, bias, residual, C, rows, b.gemm_ws, s, what);
  };
  norm(ctx, l.n1_w, l.n1_b, b, rows, s, "norm1");
  product(qkv_, b.normed, l.qkv_w, l.qkv_b, nullptr, b.qkv, "q/k/v");
  if (attention) ctx.check((*attention)(), "attention");
  product(proj_, b.attn, l.proj_w, l.proj_b, b.x, b.x, "attention projection");
  norm(ctx, l.n2_w, l.n2_b, b, rows, s, "norm2");
  product(fc1_, b.normed, l.fc1_w, l.fc1_b, nullptr, b.act, "fc1 + gelu");
  product(fc2_, b.act, l.fc2_w, l.fc2_b, b.x, b.x, "fc2");
}

void PreNormLayers::tune(const ModelContext& ctx, const PreNormBuffers& b, int64_t rows,
                         cudaStream_t s) {
  if (layers_.empty()) return;
  if (!fp8_) return bf16_layer(ctx, layers_[0], b, rows, nullptr, s);
  std::string what;
  const int rc = block8_.run(ctx.handle(), layers_[0].fp8, proj_,
                             {b.x, b.qkv, b.attn, b.act, b.q, b.q_scale, b.gemm_ws}, rows, {},
                             /*tune=*/true, s, what);
  ctx.check(rc, what.c_str());
}

void PreNormLayers::run(const ModelContext& ctx, size_t i, const PreNormBuffers& b, int64_t rows,
                        const std::function<int()>& attention, cudaStream_t s) {
  if (!fp8_) return bf16_layer(ctx, layers_.at(i), b, rows, &attention, s);
  std::string what;
  const int rc = block8_.run(ctx.handle(), layers_.at(i).fp8, proj_,
                             {b.x, b.qkv, b.attn, b.act, b.q, b.q_scale, b.gemm_ws}, rows,
                             attention, /*tune=*/false, s, what);
  ctx.check(rc, what.c_str());
}

}  // namespace encoder_kit::cuda
