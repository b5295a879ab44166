// Helpers of the kit's suites: scratch folders, the message and status of an
// encoder_kit::Error, raw safetensors bytes, and a random engine whose seed is shown
// when a check fails (fresh inputs each run, reproducible from the log).
#pragma once

#include "../plugin_test_support.hpp"

#include <encoder_kit/error.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>

namespace kit_test {

using encgraph::test::TempDir;

struct Failure {
  bool thrown = false;
  eg_status status = EG_OK;
  std::string message;
};

inline Failure failure_of(const std::function<void()>& fn) {
  Failure f;
  try {
    fn();
  } catch (const encoder_kit::Error& e) {
    f.thrown = true;
    f.status = e.status();
    f.message = e.what();
  }
  return f;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A random engine seeded afresh (or from ENCGRAPH_TEST_SEED, to replay a
// failure); the seed is printed with the first test that draws from it.
inline std::mt19937_64& rng() {
  static const uint64_t seed = std::getenv("ENCGRAPH_TEST_SEED")
                                   ? std::strtoull(std::getenv("ENCGRAPH_TEST_SEED"), nullptr, 10)
                                   : std::random_device{}();
  static std::mt19937_64 engine(seed);
  static bool shown = false;
  if (!shown) {
    MESSAGE("random seed " << seed);
    shown = true;
  }
  return engine;
}

inline int64_t uniform(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

// A safetensors file from a header text and data bytes, as given (no checks).
inline std::string safetensors_bytes(const std::string& header, const std::string& data,
                                     uint64_t declared_length = UINT64_MAX) {
  const uint64_t n = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

}  // namespace kit_test
