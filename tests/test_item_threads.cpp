// Items made on several threads (ABI 1.4, EG_PLUGIN_CONCURRENT_ITEMS): the
// index runner hands every index out once, really runs them concurrently, and
// blames the same item whatever the timing; a Runtime uses runtime.item_threads
// only for a plugin that declares the flag, and its results do not depend on
// the thread count.
#include "item_threads.hpp"
#include "manager_checks.hpp"
#include "test_support.hpp"

#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace encgraph;
using namespace encgraph::test;

TEST_CASE("item_threads_for: one thread unless the plugin allows more, never more than items") {
  CHECK(item_threads_for(4, false, 100) == 1);
  CHECK(item_threads_for(4, true, 1) == 1);
  CHECK(item_threads_for(4, true, 0) == 1);
  CHECK(item_threads_for(4, true, 3) == 3);
  CHECK(item_threads_for(4, true, 100) == 4);
  CHECK(item_threads_for(1, true, 100) == 1);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(item_threads_for(0, true, 100) == std::max(1, std::min(8, cores)));
}

TEST_CASE("for_each_index runs every index exactly once, for any thread count") {
  for (int threads : {1, 2, 3, 8}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{37}}) {
      std::vector<std::atomic<int>> runs(n);
      std::atomic<int> entered{0};
      for_each_index(
          n, threads, [&] { ++entered; }, [&](size_t i) { ++runs[i]; });
      INFO("threads " << threads << ", n " << n);
      for (size_t i = 0; i < n; ++i) CHECK(runs[i].load() == 1);
      // The caller's thread works too: `enter` runs on the others only.
      CHECK(entered.load() == (threads > 1 && n > 1 ? threads - 1 : 0));
    }
  }
}

TEST_CASE("for_each_index runs bodies at the same time") {
  // Four bodies wait until all four are inside: serial calls could never
  // get there. The wait has a generous cap only so that a broken runner
  // fails instead of hanging; on a working runner it is never reached.
  std::mutex m;
  std::condition_variable cv;
  int inside = 0;
  bool all_met = true;
  std::set<std::thread::id> ids;
  for_each_index(
      4, 4, [] {},
      [&](size_t) {
        std::unique_lock<std::mutex> lock(m);
        ids.insert(std::this_thread::get_id());
        ++inside;
        cv.notify_all();
        if (!cv.wait_for(lock, std::chrono::seconds(120), [&] { return inside == 4; }))
          all_met = false;
      });
  CHECK(all_met);
  CHECK(ids.size() == 4);
}

TEST_CASE("for_each_index rethrows the lowest failing index, whatever the timing") {
  for (int round = 0; round < 50; ++round) {
    std::string message;
    try {
      for_each_index(
          64, 4, [] {},
          [&](size_t i) {
            if (i == 5 || i == 9 || i == 40) throw std::runtime_error("item " + std::to_string(i));
          });
    } catch (const std::exception& e) {
      message = e.what();
    }
    REQUIRE(message == "item 5");
  }
  std::string entered;
  try {
    for_each_index(
        8, 2, [] { throw std::runtime_error("no device"); }, [](size_t) {});
  } catch (const std::exception& e) {
    entered = e.what();
  }
  CHECK(entered == "no device");
}

TEST_CASE("a Runtime makes items on threads only for a plugin that allows it") {
  RuntimeConfig toy = toy_config("cpu");
  toy.item_threads = 4;
  Runtime concurrent(toy);  // the SDK toy declares concurrent_items
  CHECK(concurrent.item_threads(16) == 4);
  CHECK(concurrent.item_threads(2) == 2);
  CHECK(concurrent.item_threads(1) == 1);
  RuntimeConfig raw = toy_config("cpu", "toy_faults");  // a raw C table without flags
  raw.item_threads = 4;
  Runtime serial(raw);
  CHECK(serial.item_threads(16) == 1);
  toy.item_threads = 1;
  Runtime one(toy);
  CHECK(one.item_threads(16) == 1);
}

TEST_CASE("results do not depend on runtime.item_threads") {
  std::mt19937 rng(77);
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "min_budget", "64");
  set(cfg, "max_budget", "1024");
  cfg.item_threads = 8;
  Runtime graphs(cfg);
  graphs.capture();
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  eager_cfg.item_threads = 1;
  Runtime eager(eager_cfg);
  for (int trial = 0; trial < 6; ++trial) {
    const std::vector<eg_item_desc> descs = random_descs(rng, 5 + trial * 7, 30);
    const Request request = graphs.prepare(descs);
    REQUIRE(request.rank_items.size() == 1);
    REQUIRE(request.rank_items[0].size() == descs.size());
    const Result batched = graphs.execute(request);
    check_result_equals_per_item(batched, request.rank_items[0], eager, descs);
  }
}

TEST_CASE("a failing item is named by its label, the first of several, on any thread count") {
  for (int threads : {1, 4}) {
    RuntimeConfig cfg = toy_config("cpu");
    cfg.item_threads = threads;
    Runtime rt(cfg);
    std::vector<eg_item_desc> descs;
    std::vector<std::string> labels;
    for (int i = 0; i < 24; ++i) {
      descs.push_back(image(28 + 14 * (i % 5), 56, static_cast<uint64_t>(i)));
      labels.push_back("photo-" + std::to_string(i) + ".png");
    }
    descs[7].height = 0;  // the toy refuses a zero side
    descs[15].height = 0;
    for (int round = 0; round < 10; ++round) {
      const std::string message = error_of([&] { (void)rt.prepare(descs, labels); });
      INFO("threads " << threads << ": " << message);
      CHECK(message.rfind("photo-7.png: ", 0) == 0);
      CHECK(message.find("geometry must be positive") != std::string::npos);
    }
  }
}

TEST_CASE("prepare_lazy loads and makes items on the threads, as prepare makes them") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.item_threads = 4;
  cfg.use_graphs = false;
  Runtime rt(cfg);
  constexpr size_t kItems = 20;
  std::vector<std::vector<uint8_t>> pixels(kItems);
  std::vector<eg_item_desc> geometry, full;
  for (size_t i = 0; i < kItems; ++i) {
    eg_item_desc d = image(28 + 14 * static_cast<int64_t>(i % 4), 42, i);
    pixels[i].resize(static_cast<size_t>(d.height * d.width * 3));
    for (size_t k = 0; k < pixels[i].size(); ++k) pixels[i][k] = static_cast<uint8_t>(k * 7 + i);
    geometry.push_back(d);  // no pixels: the loader attaches them
    d.pixels = pixels[i].data();
    full.push_back(d);
  }
  std::vector<std::atomic<int>> loads(kItems);
  const Request lazy = rt.prepare_lazy(geometry, {}, [&](size_t i, eg_item_desc& d) {
    ++loads[i];
    d.pixels = pixels[i].data();
    return std::shared_ptr<const void>();
  });
  for (size_t i = 0; i < kItems; ++i) CHECK(loads[i].load() == 1);
  const Request eager = rt.prepare(full);
  REQUIRE(lazy.size() == kItems);
  CHECK(lazy.tokens == eager.tokens);
  const Result a = rt.execute(lazy), b = rt.execute(eager);
  for (size_t i = 0; i < kItems; ++i) CHECK(a.item_as_float(i) == b.item_as_float(i));
  // A loader failing on two items: the first in order is reported.
  std::string message;
  try {
    (void)rt.prepare_lazy(geometry, {}, [&](size_t i, eg_item_desc& d) {
      if (i == 6 || i == 13)
        throw Error(ErrorKind::Input, "cannot decode file " + std::to_string(i));
      d.pixels = pixels[i].data();
      return std::shared_ptr<const void>();
    });
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message == "cannot decode file 6");
}
