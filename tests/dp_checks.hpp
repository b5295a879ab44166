// Checks of data parallelism shared by the CPU and GPU suites: the gathered
// result equals one runtime's result for every item, in the caller's order.
#pragma once

#include "manager_checks.hpp"

#include <encgraph/data_parallel.hpp>

namespace encgraph::test {

inline void check_data_parallel_equals_single(DataParallelRuntime& dp, Runtime& single,
                                              const std::vector<eg_item_desc>& descs) {
  const Result gathered = dp.execute(descs);
  REQUIRE(gathered.size() == descs.size());
  std::vector<Item> items;
  for (const auto& d : descs) items.push_back(single.make_item(d));
  const Result expected = single.execute(items);
  for (size_t i = 0; i < descs.size(); ++i) {
    INFO("item " << i << " of " << descs.size());
    REQUIRE(gathered.rows(i) == expected.rows(i));
    CHECK(gathered.item_as_float(i) == expected.item_as_float(i));
  }
  // Every item ran on exactly one rank.
  const RankAssignment& a = dp.last_assignment();
  int64_t assigned = 0;
  for (int64_t n : a.items_per_rank) assigned += n;
  CHECK(assigned == static_cast<int64_t>(descs.size()));
}

}  // namespace encgraph::test
