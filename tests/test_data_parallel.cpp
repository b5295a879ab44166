// Data parallelism between CPU ranks (threads, in-process all-gather): the
// gathered rows equal a single runtime's, in order; work is balanced.
#include "dp_checks.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <random>

using namespace encgraph;
using namespace encgraph::test;

TEST_CASE("three CPU ranks: gathered results equal one runtime's, in the caller's order") {
  std::mt19937 rng(31);
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 256, 1024};
  cfg.budgets.max_items_per_batch = 8;
  DataParallelRuntime dp(cfg, {"cpu", "cpu", "cpu"});
  CHECK(dp.world_size() == 3);
  dp.capture();
  Runtime single(cfg);
  single.capture();
  for (int trial = 0; trial < 6; ++trial)
    check_data_parallel_equals_single(dp, single, random_descs(rng, 1 + trial * 4, 30));
  // Fewer items than ranks: empty ranks still take part in the gather.
  check_data_parallel_equals_single(dp, single, {image(28, 28, 1)});
  CHECK(dp.execute(std::vector<eg_item_desc>{}).size() == 0);
}

TEST_CASE("items are balanced by input size, largest first onto the least-loaded rank") {
  RuntimeConfig cfg = toy_config("cpu");
  DataParallelRuntime dp(cfg, {"cpu", "cpu"});
  dp.capture();
  // Tokens 100, 4, 16, 1: rank 0 takes 100; rank 1 takes 16, 4, 1.
  const Result r =
      dp.execute({image(140, 140, 1), image(28, 28, 2), image(56, 56, 3), image(14, 14, 4)});
  const RankAssignment& a = dp.last_assignment();
  CHECK(a.order == std::vector<int64_t>{0, 2, 1, 3});
  CHECK(a.items_per_rank == std::vector<int64_t>{1, 3});
  CHECK(a.load_per_rank == std::vector<int64_t>{100, 21});
  CHECK(r.rows(0) == 100);
  CHECK(r.rows(3) == 1);
  CHECK(dp.rank(0).stats().graph_hits + dp.rank(0).stats().graph_misses == 1);
  CHECK(dp.rank(1).stats().graph_hits + dp.rank(1).stats().graph_misses == 3);
}

TEST_CASE("mixed or unknown devices are rejected") {
  RuntimeConfig cfg = toy_config("cpu");
  CHECK(error_of([&] {
          DataParallelRuntime dp(cfg, {"cpu", "cuda:0"});
        }).find("all \"cpu\" or all CUDA") != std::string::npos);
  CHECK(error_of([&] { DataParallelRuntime dp(cfg, {}); }).find("at least one") !=
        std::string::npos);
}

TEST_CASE("prepare makes each item on the rank that runs it, in assignment order") {
  RuntimeConfig cfg = toy_config("cpu");
  DataParallelRuntime dp(cfg, {"cpu", "cpu", "cpu"});
  dp.capture();
  const std::vector<eg_item_desc> descs = {image(140, 140, 1), image(28, 28, 2), image(56, 56, 3),
                                           image(14, 14, 4), image(42, 42, 5)};
  const DataParallelRequest request = dp.prepare(descs);
  REQUIRE(request.rank_items.size() == 3);
  REQUIRE(request.tokens.size() == descs.size());
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    const std::vector<int64_t> mine = request.assignment.rank_items(r);
    REQUIRE(request.rank_items[r].size() == mine.size());
    for (size_t k = 0; k < mine.size(); ++k)
      CHECK(request.rank_items[r][k].spec().output_tokens == request.tokens[mine[k]]);
  }
  // The prepared request runs like the descriptions would.
  const Result prepared = dp.execute(request);
  const Result direct = dp.execute(descs);
  REQUIRE(prepared.size() == direct.size());
  for (size_t i = 0; i < descs.size(); ++i)
    CHECK(prepared.item_as_float(i) == direct.item_as_float(i));
}
