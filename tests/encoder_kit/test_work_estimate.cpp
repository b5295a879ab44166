// encoder_kit/work_estimate.hpp: the integer FLOP count against the same count
// written out by hand in float64, window tiling against a loop over windows,
// rounding to token-equivalents, and saturation instead of overflow.
#include <encoder_kit/work_estimate.hpp>
#include "kit_test_support.hpp"

#include <cmath>
#include <cstdint>

namespace {

using encoder_kit::block_flops;
using encoder_kit::BlockShape;
using encoder_kit::Flops;
using encoder_kit::piece_square_sum;
using encoder_kit::token_equivalents;

// Qwen3-VL's vision block (hidden 1152, 16 heads, fc1/fc2 of 4304) and
// DeepSeek-OCR-2's encoder layer (hidden 896, 14 query and 2 key heads of 64,
// gate/up/down of 4864).
constexpr BlockShape kVit{1152, 1152, 1152, 4304, 1};
constexpr BlockShape kGqa{896, 896, 128, 4864, 2};

TEST_CASE("a block's FLOPs are the hand count: products per row plus 4 h len² per sequence") {
  // 27 blocks of full attention over one 84 x 84 grid (a 1344² Qwen3-VL image).
  const double h = 1152, mlp = 4304, n = 84 * 84, layers = 27;
  const double by_hand = layers * (n * (4 * h * h + 2 * h * mlp) * 2 + 4 * h * n * n);
  const Flops f = block_flops(kVit, 84 * 84, int64_t{84 * 84} * (84 * 84), 27);
  CHECK(static_cast<double>(f.value()) == doctest::Approx(by_hand).epsilon(1e-12));
  CHECK_FALSE(f.saturated());

  // Grouped KV heads and a gated MLP: q and output 896 x 896, k and v 896 x 128,
  // gate and up 896 x 4864, down 4864 x 896; one view's 512 rows of the encoder.
  const double e = 896, kv = 128, inter = 4864, rows = 512;
  const double per_row = 2 * (e * (e + 2 * kv) + e * e + 2 * e * inter + inter * e);
  CHECK(static_cast<double>(kGqa.row_flops()) == doctest::Approx(per_row).epsilon(1e-12));
  const int64_t pairs = 256 * 256 + 256 * 256 + 256 * 257 / 2;  // a prefix mask's pairs
  const double enc = 24 * (rows * per_row + 4 * e * static_cast<double>(pairs));
  CHECK(static_cast<double>(block_flops(kGqa, 512, pairs, 24).value()) ==
        doctest::Approx(enc).epsilon(1e-12));
}

TEST_CASE("products, attention and sums add up as written") {
  Flops f;
  f.product(10, 3, 7).attention(100, 64, 2).add(5, 3);
  CHECK(f.value() == 2 * 10 * 3 * 7 + 2 * (4 * 64 * 100) + 15);
  Flops g;
  g.add(f, 4);
  CHECK(g.value() == 4 * f.value());
}

TEST_CASE("windows tile a side: the last piece is shorter; no piece means one") {
  for (int i = 0; i < 50; ++i) {
    const int64_t length = kit_test::uniform(0, 300), piece = kit_test::uniform(1, 40);
    CAPTURE(length);
    CAPTURE(piece);
    int64_t by_loop = 0;
    for (int64_t at = 0; at < length; at += piece) {
      const int64_t len = std::min(piece, length - at);
      by_loop += len * len;
    }
    CHECK(piece_square_sum(length, piece) == by_loop);
  }
  CHECK(piece_square_sum(48, 0) == 48 * 48);
  CHECK(piece_square_sum(24, 4) == 6 * 16);
  CHECK(piece_square_sum(26, 4) == 6 * 16 + 4);
}

TEST_CASE("token-equivalents: a small item is its token count, rounded to the nearest") {
  const int64_t unit = 27 * kVit.row_flops();
  const int64_t rows = kit_test::uniform(1, 4096);
  CAPTURE(rows);
  CHECK(token_equivalents(block_flops(kVit, rows, 0, 27), unit) == rows);
  // Attention adds its share of a token's cost: 4 h len² / (27 row FLOPs).
  const Flops with = block_flops(kVit, rows, rows * rows, 27);
  const double expected = static_cast<double>(with.value()) / static_cast<double>(unit);
  CHECK(std::abs(static_cast<double>(token_equivalents(with, unit)) - expected) <= 0.5);
  CHECK(token_equivalents(Flops().add(14), 10) == 1);
  CHECK(token_equivalents(Flops().add(15), 10) == 2);  // halves up
  CHECK(token_equivalents(Flops(), 10) == 0);
}

TEST_CASE("huge items saturate instead of overflowing; bad arguments are errors") {
  const int64_t rows = int64_t{1} << 40;  // far past any item a plugin accepts
  const Flops f = block_flops(kVit, rows, rows * 4, 27);
  CHECK(f.saturated());
  CHECK(f.value() == INT64_MAX);
  CHECK(token_equivalents(f, 1000) == INT64_MAX / 1000 + 1);
  CHECK(encoder_kit::saturating_mul(INT64_MAX / 2, 3) == INT64_MAX);
  CHECK(encoder_kit::saturating_add(INT64_MAX - 1, 2) == INT64_MAX);
  CHECK(Flops().add(INT64_MAX).add(1).value() == INT64_MAX);

  const kit_test::Failure neg = kit_test::failure_of([] { Flops().product(-1, 2, 3); });
  CHECK(neg.status == EG_ERR_INTERNAL);
  CHECK(kit_test::contains(neg.message, "negative (-1)"));
  const kit_test::Failure unit = kit_test::failure_of([] { token_equivalents(Flops(), 0); });
  CHECK(unit.status == EG_ERR_INTERNAL);
  CHECK(kit_test::contains(unit.message, "not positive"));
}

}  // namespace
