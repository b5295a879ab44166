// The Qwen-VL towers' work estimate (plugins/qwen_vl/work.hpp), the input_size
// data-parallel ranks are balanced on, at the released sizes: the integer FLOP
// count against one written out in float64 (as scripts/gpu/bench.py counts),
// Qwen3-VL's quadratic growth with the image, Qwen2.5-VL's windows, videos
// attending within each temporal patch, and the plugin's spec reporting it.
#include "config.hpp"
#include "layout.hpp"
#include "spec.hpp"
#include "work.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

namespace {

using qwen_vl::Grid;
using qwen_vl::VisionConfig;

// The forward's FLOPs by hand in float64: patch embedding, per block the
// products (q/k/v, output, MLP) and 4 h len² per attention sequence, the
// mergers. Windows are listed one by one here (the code multiplies sums).
double flops_by_hand(const VisionConfig& c, const Grid& g, bool gated) {
  const double d = static_cast<double>(c.hidden_size),
               inter = static_cast<double>(c.intermediate_size);
  const double p = static_cast<double>(g.patches()), t = static_cast<double>(g.t);
  const double mlp_in = gated ? 2 * inter : inter;
  const double per_patch = 2 * (d * 3 * d + d * d + d * mlp_in + inter * d);
  double f = 2 * p * static_cast<double>(c.patch_dim()) * d;
  f += static_cast<double>(c.depth) * p * per_patch;
  const double md = 4 * d, out = static_cast<double>(c.out_hidden_size);
  f += static_cast<double>(1 + c.num_deepstack()) * 2 * (p / 4) * (md * md + md * out);
  const double frame = static_cast<double>(g.h * g.w);
  const double full = t * frame * frame;
  double windows = full;
  if (const int64_t wu = c.window_units(); wu > 0) {
    windows = 0;
    const int64_t hu = g.h / 2, wu_ = g.w / 2;
    for (int64_t i = 0; i < hu; i += wu)
      for (int64_t j = 0; j < wu_; j += wu) {
        const double len = static_cast<double>(std::min(wu, hu - i) * std::min(wu, wu_ - j) * 4);
        windows += t * len * len;
      }
  }
  for (int64_t b = 0; b < c.depth; ++b) f += 4 * d * (c.full_attention(b) ? full : windows);
  return f;
}

double flops(const VisionConfig& c, const Grid& g) {
  return static_cast<double>(qwen_vl::item_flops(c, g).value());
}

}  // namespace

TEST_CASE("Qwen3-VL: a 1344² image is more than 36 times a 224² one, as its FLOPs say") {
  const VisionConfig c(qwen_vl::kQwen3Vl);  // the 8B tower, patch 16
  const Grid small{1, 224 / 16, 224 / 16}, large{1, 1344 / 16, 1344 / 16};
  for (const Grid& g : {small, large})
    CHECK(flops(c, g) == doctest::Approx(flops_by_hand(c, g, false)).epsilon(1e-12));

  const int64_t a = qwen_vl::item_work(c, small), b = qwen_vl::item_work(c, large);
  CAPTURE(a);
  CAPTURE(b);
  // 36 times the patches; full attention in every block makes it dearer.
  CHECK(large.patches() == 36 * small.patches());
  CHECK(b > 36 * a);
  const double flop_ratio = flops_by_hand(c, large, false) / flops_by_hand(c, small, false);
  CHECK(static_cast<double>(b) / static_cast<double>(a) ==
        doctest::Approx(flop_ratio).epsilon(0.01));
  // A small item reports about its patches: its four mergers add 9% and
  // attention 3% to the blocks' products.
  CHECK(a >= small.patches());
  CHECK(a < small.patches() * 12 / 10);
}

TEST_CASE("Qwen2.5-VL: windows in most blocks, full attention in fullatt_block_indexes") {
  const VisionConfig c(qwen_vl::kQwen2_5Vl);  // the 7B tower, windows of 4 x 4 units
  // Sides that are and are not whole windows (8 patches), up to 1344² (96 x 96).
  for (const Grid& g : {Grid{1, 16, 16}, Grid{1, 96, 96}, Grid{1, 34, 62}, Grid{3, 18, 26}}) {
    CAPTURE(g.h);
    CAPTURE(g.w);
    CHECK(flops(c, g) == doctest::Approx(flops_by_hand(c, g, true)).epsilon(1e-12));
  }
  // Four full-attention blocks of 32: still more than the patch ratio.
  const int64_t a = qwen_vl::item_work(c, {1, 16, 16}), b = qwen_vl::item_work(c, {1, 96, 96});
  CHECK(b > 36 * a);
  CHECK(static_cast<double>(b) / static_cast<double>(a) < 36 * 1.5);
}

TEST_CASE("a video attends within each temporal patch: its work is t frames' work") {
  for (const qwen_vl::Spec* s : {&qwen_vl::kQwen3Vl, &qwen_vl::kQwen2_5Vl}) {
    const VisionConfig c(*s);
    CAPTURE(s->name);
    const Grid frame{1, 24, 28}, video{4, 24, 28};
    CHECK(qwen_vl::item_flops(c, video).value() == 4 * qwen_vl::item_flops(c, frame).value());
  }
}
