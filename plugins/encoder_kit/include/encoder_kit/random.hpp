// Deterministic random numbers for "random" weights and synthetic items. Every
// value is a pure function of (seed, stream, index), so the CPU and CUDA
// instances of a plugin draw identical weights and inputs from one seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace encoder_kit {

inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a: a stable stream id for a tensor name.
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in [0, 1) from (seed, stream, index).
inline double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t z = splitmix64(splitmix64(seed ^ splitmix64(stream)) + index);
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller over two uniforms of the same index).
inline double normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = uniform01(seed, stream, 2 * index) + 1e-300;
  const double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace encoder_kit
