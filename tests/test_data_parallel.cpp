// Data parallelism between CPU ranks (threads, in-process gather to rank 0):
// the gathered rows of every output equal a single runtime's, in order; only
// rank 0 receives; work is balanced; statistics are summed.
#include "communicator.hpp"
#include "dp_checks.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
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

TEST_CASE("the in-process gather fills the root's receive block only") {
  const auto comm = make_in_process_communicator(3);
  const size_t bytes = 16;
  std::vector<std::vector<uint8_t>> send(3), recv(3, std::vector<uint8_t>(3 * bytes, 0xAB));
  std::vector<GatherBuffers> buffers(3);
  for (int r = 0; r < 3; ++r) {
    send[r].assign(bytes, static_cast<uint8_t>(r + 1));
    buffers[r] = {send[r].data(), recv[r].data(), nullptr};
  }
  comm->gather(1, buffers, bytes);
  for (int r = 0; r < 3; ++r)
    for (size_t k = 0; k < bytes; ++k) CHECK(recv[1][r * bytes + k] == r + 1);
  // Ranks 0 and 2 received nothing, though they offered receive blocks.
  CHECK(std::all_of(recv[0].begin(), recv[0].end(), [](uint8_t b) { return b == 0xAB; }));
  CHECK(std::all_of(recv[2].begin(), recv[2].end(), [](uint8_t b) { return b == 0xAB; }));
  CHECK(comm->bytes_received(1) == static_cast<int64_t>(3 * bytes));
  CHECK(comm->bytes_received(0) == 0);
  CHECK(comm->bytes_received(2) == 0);
  // Non-root ranks may pass no receive block at all.
  buffers[0].recv = nullptr;
  buffers[2].recv = nullptr;
  comm->gather(1, buffers, bytes);
  CHECK(comm->bytes_received(1) == static_cast<int64_t>(6 * bytes));
  CHECK_THROWS_AS(comm->gather(3, buffers, bytes), Error);
}

TEST_CASE("a data-parallel runtime is an Engine: prepare, execute, summed stats") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 256, 1024};
  cfg.budgets.max_items_per_batch = 8;
  DataParallelRuntime dp(cfg, {"cpu", "cpu"});
  Engine& engine = dp;
  CHECK_FALSE(engine.is_captured());
  engine.capture();
  CHECK(engine.is_captured());
  CHECK(engine.world_size() == 2);
  CHECK(&engine.model() == static_cast<Model*>(&dp.rank(0)));
  std::mt19937 rng(7);
  const std::vector<eg_item_desc> descs = random_descs(rng, 12, 20);
  const Request request = engine.prepare(descs);
  const Result planned = engine.execute(request);
  const Result eager = engine.execute(request, ExecuteMode::Eager);
  REQUIRE(planned.size() == descs.size());
  REQUIRE(eager.size() == descs.size());
  for (size_t i = 0; i < descs.size(); ++i)
    for (size_t o = 0; o < planned.num_outputs(); ++o) {
      const std::vector<float> a = planned.item_as_float(i, o), b = eager.item_as_float(i, o);
      REQUIRE(a.size() == b.size());
      for (size_t k = 0; k < a.size(); ++k) REQUIRE(a[k] == doctest::Approx(b[k]).epsilon(1e-5));
    }
  engine.synchronize();
  const Stats sum = engine.stats();
  const Stats s0 = dp.rank(0).stats(), s1 = dp.rank(1).stats();
  CHECK(sum.graph_hits == s0.graph_hits + s1.graph_hits);
  CHECK(sum.graph_misses == s0.graph_misses + s1.graph_misses);
  CHECK(sum.graph_hits + sum.graph_misses == 2 * static_cast<int64_t>(descs.size()));
  CHECK(sum.batches_graph == s0.batches_graph + s1.batches_graph);
  CHECK(sum.num_graphs == s0.num_graphs);
}

TEST_CASE("a single Runtime is an Engine too: prepare then execute equals execute(items)") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 256, 1024};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  Engine& engine = rt;
  engine.capture();
  CHECK(engine.world_size() == 1);
  std::mt19937 rng(3);
  const std::vector<eg_item_desc> descs = random_descs(rng, 9, 20);
  const Request request = engine.prepare(descs, {"first"});
  REQUIRE(request.rank_items.size() == 1);
  CHECK(request.assignment.order.size() == descs.size());
  const Result via_engine = engine.execute(request);
  std::vector<Item> items;
  for (const auto& d : descs) items.push_back(rt.make_item(d));
  const Result direct = rt.execute(items);
  REQUIRE(via_engine.size() == direct.size());
  CHECK(via_engine.num_outputs() == rt.outputs().size());
  for (size_t i = 0; i < descs.size(); ++i)
    for (size_t o = 0; o < direct.num_outputs(); ++o)
      CHECK(via_engine.item_as_float(i, o) == direct.item_as_float(i, o));
  // A bad item is named by its label.
  eg_item_desc bad = image(28, 28, 1);
  bad.channels = 0;
  bad.height = -5;
  const std::string message = error_of([&] { engine.prepare({bad}, {"photo.png"}); });
  CHECK(message.rfind("photo.png: ", 0) == 0);
}
