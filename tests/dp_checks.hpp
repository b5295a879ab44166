// Checks of data parallelism shared by the CPU and GPU suites: the gathered
// result equals one runtime's result for every item and every output, in the
// caller's order, and only the rank that asked (rank 0) received anything.
#pragma once

#include "manager_checks.hpp"

#include <encgraph/data_parallel.hpp>

#include <cstring>

namespace encgraph::test {

inline void check_data_parallel_equals_single(DataParallelRuntime& dp, Runtime& single,
                                              const std::vector<eg_item_desc>& descs) {
  std::vector<int64_t> received_before;
  for (int r = 0; r < dp.world_size(); ++r) received_before.push_back(dp.bytes_received(r));
  const Result gathered = dp.execute(descs);
  REQUIRE(gathered.size() == descs.size());
  std::vector<Item> items;
  for (const auto& d : descs) items.push_back(single.make_item(d));
  const Result expected = single.execute(items);
  REQUIRE(gathered.num_outputs() == expected.num_outputs());
  REQUIRE(gathered.num_outputs() == single.outputs().size());
  int64_t gathered_bytes = 0;
  for (size_t o = 0; o < gathered.num_outputs(); ++o) {
    INFO("output " << gathered.output(o).name);
    CHECK(gathered.output(o).name == expected.output(o).name);
    // to_host(o) covers every item's rows at host_offset(i, o) (the gathered
    // blocks are padded per rank; the result must be packed).
    const std::vector<uint8_t> host = gathered.to_host(o);
    REQUIRE(gathered.dtype(o) == EG_DTYPE_F32);  // the toy plugins' outputs
    const size_t es = sizeof(float);
    REQUIRE(host.size() == static_cast<size_t>(gathered.total_rows(o)) *
                               static_cast<size_t>(gathered.hidden_size(o)) * es);
    gathered_bytes += static_cast<int64_t>(host.size());
    for (size_t i = 0; i < descs.size(); ++i) {
      INFO("item " << i << " of " << descs.size());
      REQUIRE(gathered.rows(i, o) == expected.rows(i, o));
      const std::vector<float> rows = gathered.item_as_float(i, o);
      const std::vector<float> want = expected.item_as_float(i, o);
      REQUIRE(rows.size() == want.size());
      for (size_t k = 0; k < rows.size(); ++k)
        if (rows[k] != doctest::Approx(want[k]).epsilon(1e-5)) {
          CHECK(rows[k] == doctest::Approx(want[k]).epsilon(1e-5));
          break;
        }
      const size_t bytes = rows.size() * es;
      REQUIRE(gathered.host_offset(i, o) + bytes <= host.size());
      std::vector<float> from_host(rows.size());
      std::memcpy(from_host.data(), host.data() + gathered.host_offset(i, o), bytes);
      CHECK(from_host == rows);
    }
  }
  // Every item ran on exactly one rank.
  const RankAssignment& a = dp.last_assignment();
  int64_t assigned = 0;
  for (int64_t n : a.items_per_rank) assigned += n;
  CHECK(assigned == static_cast<int64_t>(descs.size()));
  // Gathered to rank 0 only: at least the rows themselves arrived there (each
  // rank's block is padded to the largest), and no other rank received a byte.
  CHECK(dp.bytes_received(0) - received_before[0] >= (descs.empty() ? 0 : gathered_bytes));
  for (int r = 1; r < dp.world_size(); ++r) CHECK(dp.bytes_received(r) == received_before[r]);
}

}  // namespace encgraph::test
