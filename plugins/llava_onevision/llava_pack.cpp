#include "llava_pack.hpp"

namespace llava_onevision {
namespace {

struct Builder {
  PackPlan plan;
  void copy(int64_t row) { add({{row, 1.0f}}); }
  void newline() {
    plan.src.insert(plan.src.end(), {kNewlineRow, 0, 0, 0});
    plan.weight.insert(plan.weight.end(), {1.0f, 0.0f, 0.0f, 0.0f});
  }
  struct Tap {
    int64_t row;
    float w;
  };
  void add(std::initializer_list<Tap> taps) {
    int n = 0;
    for (const Tap& t : taps) {
      plan.src.push_back(static_cast<int32_t>(t.row));
      plan.weight.push_back(t.w);
      ++n;
    }
    for (; n < kTaps; ++n) {
      plan.src.push_back(0);
      plan.weight.push_back(0.0f);
    }
  }
  // Output (y, x) of a bilinear shrink of a map whose (r, c) entry is row_of(r, c).
  template <class RowOf>
  void bilinear(const Taps1d& ty, const Taps1d& tx, RowOf row_of) {
    add({{row_of(ty.lo, tx.lo), ty.w_lo * tx.w_lo},
         {row_of(ty.lo, tx.hi), ty.w_lo * tx.w_hi},
         {row_of(ty.hi, tx.lo), ty.w_hi * tx.w_lo},
         {row_of(ty.hi, tx.hi), ty.w_hi * tx.w_hi}});
  }
};

}  // namespace

std::vector<Taps1d> bilinear_taps(int64_t in, int64_t out) {
  std::vector<Taps1d> taps(static_cast<size_t>(out));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    float src = scale * (static_cast<float>(d) + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    const int64_t lo = static_cast<int64_t>(src);
    const float w_hi = src - static_cast<float>(lo);
    taps[d] = {lo, lo < in - 1 ? lo + 1 : lo, 1.0f - w_hi, w_hi};
  }
  return taps;
}

PackPlan image_plan(const Options& o, const ImageLayout& l) {
  const int64_t g = o.model.grid(), per_tile = o.model.rows_per_tile();
  Builder b;
  for (int64_t r = 0; r < per_tile; ++r) b.copy(r);  // the base image, as it is
  // Map position (y, x) of the unpadded map: grid tile (y / g, x / g) after
  // the base image, patch (y % g, x % g) within it.
  auto row_of = [&](int64_t y, int64_t x) {
    const int64_t my = y + l.crop_top, mx = x + l.crop_left;
    return per_tile * (1 + (my / g) * l.grid_cols + mx / g) + (my % g) * g + mx % g;
  };
  if (!l.interpolated()) {
    for (int64_t y = 0; y < l.map_h; ++y) {
      for (int64_t x = 0; x < l.map_w; ++x) b.copy(row_of(y, x));
      b.newline();
    }
    return b.plan;
  }
  const std::vector<Taps1d> ty = bilinear_taps(l.map_h, l.out_h),
                            tx = bilinear_taps(l.map_w, l.out_w);
  for (int64_t y = 0; y < l.out_h; ++y) {
    for (int64_t x = 0; x < l.out_w; ++x) b.bilinear(ty[y], tx[x], row_of);
    b.newline();
  }
  return b.plan;
}

PackPlan video_plan(const Options& o, int64_t frames) {
  const int64_t g = o.model.grid(), side = o.model.pooled_side(),
                per_tile = o.model.rows_per_tile();
  const std::vector<Taps1d> taps = bilinear_taps(g, side);
  Builder b;
  for (int64_t f = 0; f < frames; ++f) {
    auto row_of = [&](int64_t y, int64_t x) { return f * per_tile + y * g + x; };
    for (int64_t y = 0; y < side; ++y)
      for (int64_t x = 0; x < side; ++x) b.bilinear(taps[y], taps[x], row_of);
  }
  b.newline();
  return b.plan;
}

}  // namespace llava_onevision
