// Runtime::spec_for (ABI 1.2) against the spec of the item make_item makes from
// the same description, for random geometries: what data-parallel ranks balance
// on before decoding must be what they run. Shared by the plugins' suites.
#pragma once

#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace encgraph::test {

struct SpecForRange {
  int64_t max_side = 200;   // heights and widths in [1, max_side], odd ones included
  int64_t max_frames = 6;   // videos of 1..max_frames frames
  bool videos = true;       // draw videos too
  bool with_pixels = true;  // make_item from pixels (spec_for never sees them)
  int invalid_every = 7;    // every n-th description has a bad geometry
};

struct SpecForTally {
  int agreed = 0;   // both gave the same spec
  int refused = 0;  // both refused, with the same ErrorKind
};

inline std::string spec_string(const eg_item_spec& s) {
  return "{input_size " + std::to_string(s.input_size) + ", output_tokens " +
         std::to_string(s.output_tokens) + ", frames " + std::to_string(s.frames) +
         ", path_tokens " + std::to_string(s.path_tokens[0]) + " " +
         std::to_string(s.path_tokens[1]) + " " + std::to_string(s.path_tokens[2]) + " " +
         std::to_string(s.path_tokens[3]) + "}";
}

// `count` random descriptions through both; fails the test on any difference:
// another spec, one refusing what the other accepts, another ErrorKind, or a
// refusal not naming the plugin.
inline SpecForTally check_spec_for(Runtime& rt, uint64_t seed, int count,
                                   const SpecForRange& range = {}) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::string plugin = "plugin '" + rt.plugin_name() + "'";
  SpecForTally tally;
  std::vector<uint8_t> pixels;
  for (int k = 0; k < count; ++k) {
    eg_item_desc d{};
    const bool video = range.videos && pick(0, 1) == 1;
    d.modality = video ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
    d.channels = 3;
    d.height = pick(1, range.max_side);
    d.width = pick(1, range.max_side);
    d.frames = video ? pick(1, range.max_frames) : 1;
    d.seed = static_cast<uint64_t>(k);
    if (range.invalid_every > 0 && k % range.invalid_every == range.invalid_every - 1) {
      switch (pick(0, 3)) {
        case 0: d.height = -pick(0, 5); break;
        case 1: d.width = 0; break;
        case 2: d.frames = video ? 0 : 2; break;
        default: d.height = range.max_side * 1000; break;  // over any plugin's side limit
      }
    }
    if (range.with_pixels && d.height > 0 && d.width > 0 && d.frames > 0 &&
        d.height <= range.max_side && d.width <= range.max_side) {
      pixels.resize(static_cast<size_t>(d.frames * d.height * d.width * d.channels));
      for (auto& p : pixels) p = static_cast<uint8_t>(rng());
      d.pixels = pixels.data();
    }
    const std::string geometry = (video ? "video " : "image ") + std::to_string(d.frames) + "x" +
                                 std::to_string(d.height) + "x" + std::to_string(d.width);
    CAPTURE(geometry);
    bool made_ok = false, asked_ok = false;
    ErrorKind made_kind{}, asked_kind{};
    std::string made_error, asked_error;
    eg_item_spec made{}, asked{};
    try {
      made = rt.make_item(d).spec();
      made_ok = true;
    } catch (const Error& e) {
      made_kind = e.kind();
      made_error = e.what();
    }
    try {
      asked = rt.spec_for(d);
      asked_ok = true;
    } catch (const Error& e) {
      asked_kind = e.kind();
      asked_error = e.what();
    }
    CAPTURE(made_error);
    CAPTURE(asked_error);
    REQUIRE(made_ok == asked_ok);
    if (made_ok) {
      const std::string a = spec_string(asked), m = spec_string(made);
      CHECK(a == m);
      ++tally.agreed;
    } else {
      CHECK(asked_kind == made_kind);
      CHECK(asked_error.find(plugin) != std::string::npos);
      ++tally.refused;
    }
  }
  return tally;
}

}  // namespace encgraph::test
