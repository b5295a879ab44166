// Checks of the graph manager shared by the CPU and GPU suites: graph execution
// of random item mixes must equal per-item eager execution, in order.
#pragma once

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

namespace encgraph::test {

// Random images and videos; sides in patch units so token counts vary widely.
inline std::vector<eg_item_desc> random_descs(std::mt19937& rng, int count, int max_side = 20) {
  std::vector<eg_item_desc> out;
  for (int i = 0; i < count; ++i) {
    const int64_t h = 14 * (1 + static_cast<int64_t>(rng() % max_side));
    const int64_t w = 14 * (1 + static_cast<int64_t>(rng() % max_side));
    const uint64_t seed = rng();
    if (rng() % 5 == 0)
      out.push_back(video(h / 2 + 14, w / 2 + 14, 1 + static_cast<int64_t>(rng() % 3), seed));
    else
      out.push_back(image(h, w, seed));
  }
  return out;
}

// `batched` (the result of `items`, made from `descs`) against each item run
// alone through `eager`; every row must match exactly (the toy's rows depend
// only on their own sequence) and nothing may be NaN.
inline void check_result_equals_per_item(const Result& batched, const std::vector<Item>& items,
                                         Runtime& eager, const std::vector<eg_item_desc>& descs) {
  REQUIRE(batched.size() == descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    std::vector<Item> one;
    one.push_back(eager.make_item(descs[i]));
    const Result alone = eager.execute(one);
    const std::vector<float> a = batched.item_as_float(i);
    const std::vector<float> b = alone.item_as_float(0);
    REQUIRE(a.size() == b.size());
    REQUIRE(batched.rows(i) == items[i].spec().output_tokens);
    size_t mismatches = 0, nans = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(a[k])) ++nans;
      if (a[k] != b[k]) ++mismatches;
    }
    INFO("item " << i << " of " << descs.size() << ", " << descs[i].height << "x" << descs[i].width
                 << "x" << descs[i].frames);
    CHECK(nans == 0);
    CHECK(mismatches == 0);
  }
}

// Runs `descs` through `graphs` (captured) in one call, then the check above.
inline void check_batch_equals_per_item(Runtime& graphs, Runtime& eager,
                                        const std::vector<eg_item_desc>& descs) {
  std::vector<Item> items;
  for (const auto& d : descs) items.push_back(graphs.make_item(d));
  check_result_equals_per_item(graphs.execute(items), items, eager, descs);
}

}  // namespace encgraph::test
