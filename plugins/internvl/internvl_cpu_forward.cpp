// The encoder on the CPU in f32: what CI runs, and the CUDA path's reference.
#include "internvl_weights.hpp"

#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/workspace_carver.hpp>

#include <cstring>
#include <functional>
#include <string>

namespace internvl {
namespace {

namespace k = encoder_kit::cpu;

// nn.LayerNorm's default: the projector's norm does not take the config's eps.
constexpr float kProjectorEps = 1e-5f;
constexpr float kQkNormEps = 1e-6f;  // InternVLVisionRMSNorm's default

struct Activations {
  float* x;         // [seq rows, hidden] residual stream
  float* normed;    // [seq rows, hidden]; the patch embeddings first
  float* qkv;       // [seq rows, 3 hidden]
  float* attn;      // [seq rows, hidden]
  float* mlp;       // [seq rows, inter]
  float* shuffled;  // [out rows, shuffled_width], then its layer norm in place
  float* mid;       // [out rows, text_hidden]
  float* scratch;
  size_t scratch_floats;
  size_t total_floats;
};

Activations carve(const Options& o, const Capacity& cap, float* base) {
  const ModelConfig& c = o.model;
  const size_t r = static_cast<size_t>(cap.seq_rows(c)), d = static_cast<size_t>(c.hidden_size);
  const size_t out = static_cast<size_t>(cap.out_rows(c));
  Activations a{};
  encoder_kit::WorkspaceCarver<float> ws(base, 64);  // every array 256-byte aligned
  a.x = ws.take(r * d);
  a.normed = ws.take(r * d);
  a.qkv = ws.take(3 * r * d);
  a.attn = ws.take(r * d);
  a.mlp = ws.take(r * static_cast<size_t>(c.intermediate_size));
  a.shuffled = ws.take(out * static_cast<size_t>(c.shuffled_width()));
  a.mid = ws.take(out * static_cast<size_t>(c.text_hidden_size));
  a.scratch_floats = k::attention_scratch_floats(c.seq_per_tile(), c.head_dim());
  a.scratch = ws.take(a.scratch_floats);
  a.total_floats = ws.size();
  return a;
}

}  // namespace

std::vector<int64_t> pixel_shuffle_sources(const ModelConfig& c, int64_t tiles) {
  const int64_t g = c.grid(), s = c.shuffle, h = g / s;
  std::vector<int64_t> src;
  src.reserve(static_cast<size_t>(tiles * c.patches_per_tile()));
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < h; ++j)
        for (int64_t a = 0; a < s; ++a)
          for (int64_t b = 0; b < s; ++b)
            src.push_back(t * c.seq_per_tile() + 1 + (s * i + a) * g + s * j + b);
  return src;
}

size_t cpu_workspace_bytes(const Options& o, const Capacity& cap) {
  return carve(o, cap, nullptr).total_floats * sizeof(float);
}

void cpu_forward(const Options& o, const Weights& w, const Capacity& cap, const eg_tensor* buffers,
                 float* output, void* workspace, size_t workspace_bytes) {
  const ModelConfig& c = o.model;
  const Activations a = carve(o, cap, static_cast<float*>(workspace));
  if (a.total_floats * sizeof(float) > workspace_bytes)
    encoder_kit::fail(
        EG_ERR_INVALID_ARGUMENT,
        "internvl: workspace of " + std::to_string(workspace_bytes) + " bytes is too small");
  const int64_t d = c.hidden_size, rows = cap.seq_rows(c), n = c.patches_per_tile();
  const auto* pixels = static_cast<const float*>(buffers[kPixelRows].data);
  const auto* cu = static_cast<const int32_t*>(buffers[kCuSeqlens].data);
  const int64_t num_seqs = buffers[kCuSeqlens].shape[0] - 1;
  const int64_t covered = check_cu_seqlens(o, cap, cu, num_seqs);

  // Each tile: the CLS row, then its patches' embeddings plus their positions.
  k::linear(pixels, cap.patch_rows(c), c.patch_cols(), w.patch_w.data(), w.patch_b.data(), d,
            a.normed);
  for (int64_t t = 0; t < cap.tiles; ++t) {
    float* x = a.x + t * c.seq_per_tile() * d;
    std::memcpy(x, w.cls.data(), static_cast<size_t>(d) * 4);
    for (int64_t e = 0; e < n * d; ++e) x[d + e] = a.normed[t * n * d + e] + w.pos[e];
  }
  const encoder_kit::cpu::PreNormActivations la{a.x,   a.normed,  a.qkv,           a.attn,
                                                a.mlp, a.scratch, a.scratch_floats};
  for (const LayerWeights& l : w.layers) {
    // use_qk_norm: RMSNorm over all heads of q and of k, in place.
    auto qk_norm = [&] {
      for (int64_t r = 0; r < rows; ++r) {
        float* q = a.qkv + r * 3 * d;
        k::rms_norm(q, 1, d, l.q_norm.data(), kQkNormEps, q);
        k::rms_norm(q + d, 1, d, l.k_norm.data(), kQkNormEps, q + d);
      }
    };
    encoder_kit::cpu::prenorm_layer(c.layer_form(), l, la, rows, cu, num_seqs,
                                    covered * c.seq_per_tile(),
                                    c.use_qk_norm ? std::function<void()>(qk_norm) : nullptr);
  }
  const float* features = a.x;
  if (c.uses_final_layernorm()) {
    k::layer_norm(a.x, rows, d, w.final_w.data(), w.final_b.data(), c.layer_norm_eps, a.normed);
    features = a.normed;
  }

  const std::vector<int64_t> src = pixel_shuffle_sources(c, cap.tiles);
  for (size_t r = 0; r < src.size(); ++r)
    std::memcpy(a.shuffled + r * d, features + src[r] * d, static_cast<size_t>(d) * 4);
  const int64_t out = cap.out_rows(c), sw = c.shuffled_width(), th = c.text_hidden_size;
  k::layer_norm(a.shuffled, out, sw, w.proj_ln_w.data(), w.proj_ln_b.data(), kProjectorEps,
                a.shuffled);
  k::linear(a.shuffled, out, sw, w.proj1_w.data(), w.proj1_b.data(), th, a.mid);
  k::gelu_erf(a.mid, static_cast<size_t>(out * th));
  k::linear(a.mid, out, th, w.proj2_w.data(), w.proj2_b.data(), th, output);
}

}  // namespace internvl
