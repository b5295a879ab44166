// Data parallelism over two GPUs, NCCL gathering to rank 0 (needs 2 CUDA devices):
// every output equals one runtime's, and rank 1 receives nothing.
#include "dp_checks.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <random>

using namespace encgraph;
using namespace encgraph::test;

TEST_CASE("two GPUs: gathered results equal one runtime's, in the caller's order") {
  std::mt19937 rng(5);
  RuntimeConfig cfg = toy_config("cuda");
  set(cfg, "hidden", "32");
  cfg.budgets.token_budgets = {64, 256, 1024};
  cfg.budgets.max_items_per_batch = 8;
  cfg.poison_memory = true;
  DataParallelRuntime dp(cfg, {"cuda:0", "cuda:1"});
  dp.capture();
  RuntimeConfig single_cfg = cfg;
  single_cfg.device = "cuda:1";
  Runtime reference(single_cfg);
  reference.capture();
  for (int trial = 0; trial < 6; ++trial)
    check_data_parallel_equals_single(dp, reference, random_descs(rng, 2 + trial * 5, 30));
  CHECK(dp.rank(1).stats().graph_hits > 0);
}
