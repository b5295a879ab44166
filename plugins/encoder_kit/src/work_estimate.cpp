#include <encoder_kit/error.hpp>
#include <encoder_kit/work_estimate.hpp>

#include <string>

namespace encoder_kit {
namespace {

// The arguments are sizes the plugin computed: a negative one is its bug.
int64_t count(int64_t v, const char* what) {
  if (v < 0)
    fail(EG_ERR_INTERNAL,
         std::string("work estimate: ") + what + " is negative (" + std::to_string(v) + ")");
  return v;
}

}  // namespace

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(count(a, "a factor"), count(b, "a factor"), &r) ? INT64_MAX : r;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(count(a, "a term"), count(b, "a term"), &r) ? INT64_MAX : r;
}

Flops& Flops::product(int64_t rows, int64_t in, int64_t out, int64_t times) {
  return add(saturating_mul(saturating_mul(2, rows), saturating_mul(in, out)), times);
}

Flops& Flops::attention(int64_t pairs, int64_t width, int64_t times) {
  return add(saturating_mul(saturating_mul(4, width), pairs), times);
}

Flops& Flops::add(int64_t flops, int64_t times) {
  value_ = saturating_add(value_, saturating_mul(flops, times));
  return *this;
}

int64_t BlockShape::row_flops() const {
  const int64_t qkv = saturating_add(q_width, saturating_mul(2, kv_width));
  int64_t per_row = saturating_mul(hidden, qkv);                       // q, k, v
  per_row = saturating_add(per_row, saturating_mul(q_width, hidden));  // output
  per_row = saturating_add(per_row, saturating_mul(saturating_mul(mlp_inputs, hidden), mlp_width));
  per_row = saturating_add(per_row, saturating_mul(mlp_width, hidden));  // down / fc2
  return saturating_mul(2, per_row);
}

Flops block_flops(const BlockShape& b, int64_t rows, int64_t pairs, int64_t layers) {
  Flops one;
  one.add(b.row_flops(), rows).attention(pairs, b.q_width);
  return Flops().add(one, layers);
}

int64_t piece_square_sum(int64_t length, int64_t piece) {
  count(length, "a length");
  if (piece <= 0 || piece >= length) return saturating_mul(length, length);
  const int64_t whole = length / piece, rest = length % piece;
  return saturating_add(saturating_mul(whole, saturating_mul(piece, piece)),
                        saturating_mul(rest, rest));
}

int64_t token_equivalents(const Flops& flops, int64_t unit_flops) {
  if (unit_flops <= 0)
    fail(EG_ERR_INTERNAL,
         "work estimate: the unit is " + std::to_string(unit_flops) + " FLOPs, not positive");
  const int64_t whole = flops.value() / unit_flops, rest = flops.value() % unit_flops;
  return rest >= unit_flops - rest ? whole + 1 : whole;  // half up; no overflow
}

}  // namespace encoder_kit
