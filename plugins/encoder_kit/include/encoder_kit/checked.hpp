// Size arithmetic on numbers from configs, file headers and items: a product
// or sum that would overflow int64 is an error naming what was computed, never
// a wrapped (or undefined) value.
#pragma once

#include <encoder_kit/error.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace encoder_kit {

[[noreturn]] inline void overflow(std::string_view what, int64_t a, int64_t b, const char* op) {
  fail(EG_ERR_INVALID_ARGUMENT, std::string(what) + " overflows 64 bits (" + std::to_string(a) +
                                    " " + op + " " + std::to_string(b) +
                                    "): a size in the configuration or input is far too large");
}

// a * b; Error(INVALID_ARGUMENT) naming `what` when it does not fit.
inline int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what, a, b, "x");
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow(what, a, b, "+");
  return r;
}

inline int64_t checked_product(std::initializer_list<int64_t> values, std::string_view what) {
  int64_t r = 1;
  for (int64_t v : values) r = checked_mul(r, v, what);
  return r;
}

inline int64_t checked_sum(std::initializer_list<int64_t> values, std::string_view what) {
  int64_t r = 0;
  for (int64_t v : values) r = checked_add(r, v, what);
  return r;
}

// Checked products and sums under one `what` (a model's parameter count).
struct CheckedCount {
  std::string what;
  int64_t mul(std::initializer_list<int64_t> v) const { return checked_product(v, what); }
  int64_t sum(std::initializer_list<int64_t> v) const { return checked_sum(v, what); }
};

}  // namespace encoder_kit
