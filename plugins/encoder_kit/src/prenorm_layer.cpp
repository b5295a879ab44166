#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/prenorm_layer.hpp>

#include <cmath>
#include <cstring>

namespace encoder_kit::cpu {

void prenorm_layer(const PreNormForm& f, const PreNormLayerWeights& l, const PreNormActivations& a,
                   int64_t rows, const int32_t* cu, int64_t num_seqs, int64_t covered,
                   const std::function<void()>& after_qkv) {
  const int64_t d = f.d, inter = f.inter, hd = f.head_dim();
  auto norm = [&](const std::vector<float>& w, const std::vector<float>& b) {
    if (f.rms_norm)
      rms_norm(a.x, rows, d, w.data(), f.eps, a.normed);
    else
      layer_norm(a.x, rows, d, w.data(), b.data(), f.eps, a.normed);
  };
  norm(l.norm1_w, l.norm1_b);
  linear(a.normed, rows, d, l.qkv_w.data(), l.qkv_b.data(), 3 * d, a.qkv);
  if (after_qkv) after_qkv();
  if (covered < rows)
    std::memset(a.attn + covered * d, 0, static_cast<size_t>((rows - covered) * d) * sizeof(float));
  varlen_attention(a.qkv, a.qkv + d, a.qkv + 2 * d, 3 * d, a.attn, d, cu, num_seqs, f.heads, hd,
                   1.0f / std::sqrt(static_cast<float>(hd)), a.scratch, a.scratch_floats);
  linear(a.attn, rows, d, l.proj_w.data(), l.proj_b.data(), d, a.x, /*accumulate=*/true);
  norm(l.norm2_w, l.norm2_b);
  linear(a.normed, rows, d, l.fc1_w.data(), l.fc1_b.data(), inter, a.mlp);
  if (f.gelu_tanh)
    gelu_tanh(a.mlp, static_cast<size_t>(rows * inter));
  else
    gelu_erf(a.mlp, static_cast<size_t>(rows * inter));
  linear(a.mlp, rows, inter, l.fc2_w.data(), l.fc2_b.data(), d, a.x, /*accumulate=*/true);
}

}  // namespace encoder_kit::cpu
