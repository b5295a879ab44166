#include "dsocr2_work.hpp"

namespace dsocr2 {
namespace {

using encoder_kit::saturating_mul;

int64_t ceil_half(int64_t n) {
  return (n + 1) / 2;
}

}  // namespace

encoder_kit::Flops view_flops(const ModelConfig& m, int64_t side) {
  const int64_t g = m.grid(side), gg = g * g, D = m.sam_hidden_size;
  encoder_kit::Flops f;
  f.product(gg, 3 * m.patch_size * m.patch_size, D);  // the patch embedding
  for (int64_t l = 0; l < m.sam_layers; ++l) {
    // A windowed layer pads the map to whole windows: the padded rows go
    // through q/k/v and the projection and attend like real ones.
    const int64_t win = m.is_global_layer(l) ? g : m.window_size;
    const int64_t per = (g + win - 1) / win, windows = per * per, len = win * win;
    const int64_t rows = windows * len;
    f.product(rows, D, 3 * D).product(rows, D, D);
    f.attention(saturating_mul(windows, saturating_mul(len, len)), D);
    f.product(gg, D, m.sam_mlp_dim).product(gg, m.sam_mlp_dim, D);
  }
  // Neck (1x1 then 3x3) and the two stride-2 3x3 downsampling convolutions.
  const int64_t C = m.neck_channels, c1 = m.downsample_channels[0], E = m.encoder_hidden();
  const int64_t half = ceil_half(g), n = ceil_half(half) * ceil_half(half);
  f.product(gg, D, C).product(gg, 9 * C, C);
  f.product(half * half, 9 * C, c1).product(n, 9 * c1, E);
  // The encoder over [n image tokens | n queries]: image tokens see the n
  // image tokens, query j the image and queries 0..j (the prefix mask).
  const int64_t hd = m.encoder_head_dim();
  const encoder_kit::BlockShape block{E, m.encoder_heads * hd, m.encoder_kv_heads * hd,
                                      m.encoder_intermediate_size, 2};
  const int64_t pairs = 2 * n * n + n * (n + 1) / 2;
  f.add(encoder_kit::block_flops(block, 2 * n, pairs, m.encoder_layers));
  f.product(n, E, m.text_hidden_size);  // the projector, on the query rows
  return f;
}

int64_t sam_patch_unit_flops(const ModelConfig& m) {
  const int64_t D = m.sam_hidden_size;
  const encoder_kit::BlockShape sam{D, D, D, m.sam_mlp_dim, 1};
  return saturating_mul(m.sam_layers, sam.row_flops());
}

int64_t image_work(const ModelConfig& m, int64_t crops) {
  encoder_kit::Flops f = view_flops(m, m.global_size);
  f.add(view_flops(m, m.tile_size), crops);
  return encoder_kit::token_equivalents(f, sam_patch_unit_flops(m));
}

}  // namespace dsocr2
