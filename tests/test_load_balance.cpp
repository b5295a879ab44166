// Data-parallel balance: largest first onto the least-loaded rank.
#include <encgraph/error.hpp>
#include <encgraph/load_balance.hpp>

#include <doctest/doctest.h>

using namespace encgraph;
using V = std::vector<int64_t>;

TEST_CASE("the reference example") {
  const RankAssignment a = balance_by_input_size({1000, 100, 200, 50}, 2);
  CHECK(a.order == V{0, 2, 1, 3});
  CHECK(a.items_per_rank == V{1, 3});
  CHECK(a.load_per_rank == V{1000, 350});
  CHECK(a.rank_items(1) == V{2, 1, 3});
}

TEST_CASE("ties go to the lowest rank; more ranks than items leaves ranks empty") {
  const RankAssignment a = balance_by_input_size({5, 5, 5}, 4);
  CHECK(a.items_per_rank == V{1, 1, 1, 0});
  CHECK(a.order == V{0, 1, 2});
  CHECK(a.rank_items(3).empty());
  CHECK_THROWS_AS(balance_by_input_size({1}, 0), Error);
}
