// Checks of data parallelism shared by the CPU and GPU suites: the gathered
// result equals one runtime's result for every item, in the caller's order.
#pragma once

#include "manager_checks.hpp"

#include <encgraph/data_parallel.hpp>

#include <cstring>

namespace encgraph::test {

inline void check_data_parallel_equals_single(DataParallelRuntime& dp, Runtime& single,
                                              const std::vector<eg_item_desc>& descs) {
  const Result gathered = dp.execute(descs);
  REQUIRE(gathered.size() == descs.size());
  std::vector<Item> items;
  for (const auto& d : descs) items.push_back(single.make_item(d));
  const Result expected = single.execute(items);
  // to_host() covers every item's rows at host_offset(i) (the gathered blocks
  // are padded per rank; the result must be packed).
  const std::vector<uint8_t> host = gathered.to_host();
  REQUIRE(gathered.item(0).dtype == EG_DTYPE_F32);  // the toy plugins' output
  const size_t es = sizeof(float);
  REQUIRE(host.size() == static_cast<size_t>(gathered.total_rows()) *
                             static_cast<size_t>(gathered.item(0).shape[1]) * es);
  for (size_t i = 0; i < descs.size(); ++i) {
    INFO("item " << i << " of " << descs.size());
    REQUIRE(gathered.rows(i) == expected.rows(i));
    const std::vector<float> rows = gathered.item_as_float(i);
    CHECK(rows == expected.item_as_float(i));
    const size_t bytes = rows.size() * es;
    REQUIRE(gathered.host_offset(i) + bytes <= host.size());
    std::vector<float> from_host(rows.size());
    std::memcpy(from_host.data(), host.data() + gathered.host_offset(i), bytes);
    CHECK(from_host == rows);
  }
  // Every item ran on exactly one rank.
  const RankAssignment& a = dp.last_assignment();
  int64_t assigned = 0;
  for (int64_t n : a.items_per_rank) assigned += n;
  CHECK(assigned == static_cast<int64_t>(descs.size()));
}

}  // namespace encgraph::test
