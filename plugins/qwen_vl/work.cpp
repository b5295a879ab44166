#include "work.hpp"

#include "spec.hpp"

namespace qwen_vl {
namespace {

using encoder_kit::saturating_mul;

encoder_kit::BlockShape block_shape(const VisionConfig& c) {
  // Fused q/k/v of full width; GatedSilu has gate and up, GeluTanh one fc1.
  return {c.hidden_size, c.hidden_size, c.hidden_size, c.mlp_width(),
          c.spec->mlp == Mlp::GatedSilu ? 2 : 1};
}

}  // namespace

encoder_kit::Flops item_flops(const VisionConfig& c, const Grid& g) {
  const int64_t patches = g.patches(), tokens = patches / c.merge_unit();
  const int64_t frame_patches = g.h * g.w;
  // Full attention: one sequence a temporal patch (cu_seqlens).
  const int64_t full_pairs = saturating_mul(g.t, saturating_mul(frame_patches, frame_patches));
  // Windows of window_units x window_units merged units tile each temporal
  // patch (the last row and column shorter): the sum of len² splits into
  // rows x columns, in patches (merge_unit patches a unit).
  const int64_t side = c.window_units(), m = c.spatial_merge_size;
  int64_t window_pairs = full_pairs;
  if (side > 0) {
    const int64_t unit_pairs = saturating_mul(encoder_kit::piece_square_sum(g.h / m, side),
                                              encoder_kit::piece_square_sum(g.w / m, side));
    window_pairs = saturating_mul(
        g.t, saturating_mul(unit_pairs, saturating_mul(c.merge_unit(), c.merge_unit())));
  }
  int64_t full_blocks = 0;
  for (int64_t b = 0; b < c.depth; ++b) full_blocks += c.full_attention(b) ? 1 : 0;

  const encoder_kit::BlockShape block = block_shape(c);
  encoder_kit::Flops f;
  f.product(patches, c.patch_dim(), c.hidden_size);  // the patch embedding (Conv3d)
  f.add(encoder_kit::block_flops(block, patches, full_pairs, full_blocks));
  f.add(encoder_kit::block_flops(block, patches, window_pairs, c.depth - full_blocks));
  const int64_t merged = c.merge_unit() * c.hidden_size;
  if (c.spec->outputs == Outputs::Downsample) {
    // The downsample Conv2d (merge_unit x hidden in), the merger's proj, gate,
    // up (intermediate_size wide) and down, per output token.
    const int64_t out = c.out_hidden_size, wide = c.intermediate_size;
    f.product(tokens, merged, out).product(tokens, out, out);
    f.product(tokens, out, wide).product(tokens, out, wide).product(tokens, wide, out);
    return f;
  }
  // The merger and each deepstack merger, per output token: merge_unit x
  // hidden wide in and between its two products, out_hidden_size out.
  encoder_kit::Flops merger;
  merger.product(tokens, merged, merged).product(tokens, merged, c.out_hidden_size);
  f.add(merger, 1 + c.num_deepstack());
  return f;
}

int64_t patch_unit_flops(const VisionConfig& c) {
  return saturating_mul(c.depth, block_shape(c).row_flops());
}

int64_t item_work(const VisionConfig& c, const Grid& grid) {
  return encoder_kit::token_equivalents(item_flops(c, grid), patch_unit_flops(c));
}

}  // namespace qwen_vl
