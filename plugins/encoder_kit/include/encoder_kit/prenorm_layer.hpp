// A ViT's pre-norm transformer layer, as SigLIP and InternViT have it:
//   x += proj(attention(qkv(norm1(x)))),  x += fc2(gelu(fc1(norm2(x))))
// with LayerNorm or RMSNorm and GELU's erf or tanh form: its form, its
// weights as the checkpoint holds them, and its forward on the CPU in f32.
// The CUDA layers over the same weights are encoder_kit/cuda/prenorm_layers.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace encoder_kit {

struct PreNormForm {
  int64_t d = 0, inter = 0, heads = 0;  // hidden width, MLP width, attention heads
  float eps = 0.0f;                     // the norms'
  bool rms_norm = false;                // RMSNorm (no bias) instead of LayerNorm
  bool gelu_tanh = false;               // GELU(approximate="tanh") instead of the exact one
  int64_t head_dim() const { return d / heads; }
};

// Linear weights [out, in]; the norms' biases empty with rms_norm.
struct PreNormLayerWeights {
  std::vector<float> norm1_w, norm1_b;  // [d]
  std::vector<float> qkv_w, qkv_b;      // q, k, v stacked: [3d, d], [3d]
  std::vector<float> proj_w, proj_b;    // attention's output projection: [d, d], [d]
  std::vector<float> norm2_w, norm2_b;  // [d]
  std::vector<float> fc1_w, fc1_b;      // [inter, d], [inter]
  std::vector<float> fc2_w, fc2_b;      // [d, inter], [d]
};

namespace cpu {

// One forward's arrays: x [rows, d] (updated in place), normed [rows, d], qkv
// [rows, 3d], attn [rows, d], mlp [rows, inter], and attention's scratch
// (attention_scratch_floats for the longest sequence).
struct PreNormActivations {
  float *x, *normed, *qkv, *attn, *mlp, *scratch;
  size_t scratch_floats;
};

// The layer over `rows` rows; attention within each of the num_seqs
// sequences of cu_seqlens `cu`, which cover the first `covered` rows (the
// rest, graph padding, are in none: their attention rows are zeroed so they
// stay finite). after_qkv, when set, runs between qkv and attention (e.g.
// InternViT-6B's q/k norms, in place in a.qkv).
void prenorm_layer(const PreNormForm& f, const PreNormLayerWeights& l, const PreNormActivations& a,
                   int64_t rows, const int32_t* cu, int64_t num_seqs, int64_t covered,
                   const std::function<void()>& after_qkv = {});

}  // namespace cpu
}  // namespace encoder_kit
