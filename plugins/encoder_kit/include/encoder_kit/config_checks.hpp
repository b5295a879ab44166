// Checks and choices every model plugin's configuration shares, whichever
// reader produced the values: the compute dtype, and bounds that keep the size
// products a plugin computes far inside 64 bits (and name a typo, rather than
// allocate it).
#pragma once

#include <encoder_kit/error.hpp>

#include <cstdint>
#include <string>

namespace encoder_kit {

// What a model plugin computes in: f32 on the CPU, bf16 on CUDA.
enum class ComputeDtype { F32, BF16 };

// Throws Error(INVALID_ARGUMENT) "<plugin>: <name> must be positive, got <v>".
inline void require_positive(const std::string& plugin, const char* name, int64_t value) {
  if (value <= 0)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": " + name + " must be positive, got " + std::to_string(value));
}

// Throws Error(INVALID_ARGUMENT) "<plugin>: <name> = <v> is outside [lo, hi]".
// For values that may come from a checkpoint's config.json as well as a key
// (a key alone is bounded by sdk::Config::get's Bounds).
inline void require_in_range(const std::string& plugin, const char* name, int64_t value, int64_t lo,
                             int64_t hi) {
  if (value < lo || value > hi)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + name + " = " + std::to_string(value) +
                                      " is outside [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "]");
}

}  // namespace encoder_kit
