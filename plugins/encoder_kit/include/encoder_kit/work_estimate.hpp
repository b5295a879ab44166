// An item's forward work, for eg_item_spec::input_size: the runtime balances
// data-parallel ranks on it (largest first onto the least-loaded rank), so it
// must grow as the item's run time does. A patch count grows linearly, but
// attention grows with the square of each sequence's length: a 1344² image
// costs far more than 36 times a 224² one when its blocks attend over the
// whole image. So a plugin counts the FLOPs of its item's matrix products and
// attention (2 per multiply-add) with the model's real shapes and reports them
// in token-equivalents: the FLOPs divided by what one token costs in the
// blocks' products, so a small item reports about its token count.
//
// Exact integer arithmetic: every product and sum saturates at INT64_MAX
// instead of overflowing, so a huge item still reports a huge (never a
// wrapped or undefined) value.
#pragma once

#include <cstdint>

namespace encoder_kit {

// a * b and a + b for a, b >= 0, INT64_MAX when the true value is larger.
int64_t saturating_mul(int64_t a, int64_t b);
int64_t saturating_add(int64_t a, int64_t b);

// A FLOP count (2 per multiply-add) that saturates at INT64_MAX. Arguments
// are counts, so a negative one is an error (Error(INTERNAL)).
class Flops {
 public:
  // `rows` rows through an `in` x `out` matrix product, `times` times.
  Flops& product(int64_t rows, int64_t in, int64_t out, int64_t times = 1);
  // Attention covering `pairs` (query, key) pairs, `width` = query heads x
  // head dim: Q Kᵀ and P V, 2 * width FLOPs a pair each; `times` times.
  Flops& attention(int64_t pairs, int64_t width, int64_t times = 1);
  // `flops` more, `times` times.
  Flops& add(int64_t flops, int64_t times = 1);
  Flops& add(const Flops& other, int64_t times = 1) { return add(other.value(), times); }

  int64_t value() const { return value_; }
  bool saturated() const { return value_ == INT64_MAX; }

 private:
  int64_t value_ = 0;
};

// One transformer block's matrix products, per row: the query, key and value
// projections, the output projection and the MLP (norms, activations and
// softmax are a few FLOPs a value, left out).
struct BlockShape {
  int64_t hidden = 0;      // the residual width
  int64_t q_width = 0;     // query heads x head dim (the attention's width)
  int64_t kv_width = 0;    // key (= value) heads x head dim; q_width without grouped heads
  int64_t mlp_width = 0;   // the MLP's intermediate size
  int64_t mlp_inputs = 1;  // products from hidden to mlp_width: 1 (fc1), 2 (gate and up)

  // What one row costs in the block's products:
  // 2 * (hidden * (q + 2 kv) + q * hidden + mlp_inputs * hidden * mlp + mlp * hidden).
  int64_t row_flops() const;
};

// `rows` rows through `layers` blocks of shape `b`, whose attention covers
// `pairs` (query, key) pairs in each block (the sum of len² over the
// sequences it attends within, for unmasked attention).
Flops block_flops(const BlockShape& b, int64_t rows, int64_t pairs, int64_t layers = 1);

// Sum of len² over the pieces a run of `length` splits into when cut every
// `piece` (the last one shorter): a side of a grid tiled by windows.
// piece <= 0 means one piece of the whole run.
int64_t piece_square_sum(int64_t length, int64_t piece);

// `flops` in units of `unit_flops` (> 0, else Error(INTERNAL)), rounded to the
// nearest (halves up): what a plugin reports as input_size. At most
// INT64_MAX / unit_flops + 1, so a saturated count stays far from overflowing
// the runtime's sums of a rank's work.
int64_t token_equivalents(const Flops& flops, int64_t unit_flops);

}  // namespace encoder_kit
