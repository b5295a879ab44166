// The serve batch scheduler: items of several requests share a batch, a batch
// is due by size, by tokens or by its oldest item's deadline (an injected
// clock, never the wall clock), requests are queued whole or refused, and
// closing hands out what is queued.
#include "serve/batch_scheduler.hpp"

#include <doctest/doctest.h>

#include <set>
#include <thread>

using namespace encgraph::host::serve;
using namespace std::chrono_literals;

namespace {

class ManualClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  void advance(std::chrono::microseconds d) { now_ += d; }

 private:
  TimePoint now_{};
};

std::vector<QueuedItem> request(uint64_t id, std::vector<int64_t> tokens) {
  std::vector<QueuedItem> items;
  for (int64_t t : tokens) items.push_back({id, t, {}, nullptr});
  return items;
}

BatchLimits limits(int64_t items, int64_t tokens, int64_t delay_us, int64_t queue = 100) {
  BatchLimits l;
  l.max_items = items;
  l.max_tokens = tokens;
  l.max_delay = std::chrono::microseconds(delay_us);
  l.max_queue_items = queue;
  return l;
}

}  // namespace

TEST_CASE("items from several requests wait for the deadline, then run as one batch") {
  ManualClock clock;
  BatchScheduler s(limits(8, 1000, 500), clock);
  REQUIRE(s.submit(request(1, {10, 10})));
  clock.advance(100us);
  REQUIRE(s.submit(request(2, {10})));
  REQUIRE(s.submit(request(3, {10})));
  CHECK(s.take_due(clock.now()).empty());  // 100 us < 500 us: not yet
  REQUIRE(s.deadline());
  CHECK(*s.deadline() == TimePoint{} + 500us);  // the oldest item's
  clock.advance(399us);
  CHECK(s.take_due(clock.now()).empty());
  clock.advance(1us);
  const auto batch = s.take_due(clock.now());
  REQUIRE(batch.size() == 4);
  std::set<uint64_t> requests;
  for (const auto& q : batch) requests.insert(q.request);
  CHECK(requests == std::set<uint64_t>{1, 2, 3});
  CHECK(batch[0].request == 1);  // arrival order
  CHECK(batch[3].request == 3);
  CHECK(batch[2].enqueued == TimePoint{} + 100us);
  CHECK(s.queued_items() == 0);
  CHECK_FALSE(s.deadline());
}

TEST_CASE("a full batch of items or of tokens is due before the deadline") {
  ManualClock clock;
  SUBCASE("items") {
    BatchScheduler s(limits(3, 1000, 1000000), clock);
    REQUIRE(s.submit(request(1, {1, 1})));
    CHECK(s.take_due(clock.now()).empty());
    REQUIRE(s.submit(request(2, {1, 1})));
    const auto batch = s.take_due(clock.now());
    CHECK(batch.size() == 3);  // max_items; one is left
    CHECK(s.queued_items() == 1);
    CHECK(s.take_due(clock.now()).empty());  // one item is not a full batch
  }
  SUBCASE("tokens") {
    BatchScheduler s(limits(100, 64, 1000000), clock);
    REQUIRE(s.submit(request(1, {30, 30})));
    CHECK(s.take_due(clock.now()).empty());
    REQUIRE(s.submit(request(2, {30})));
    const auto batch = s.take_due(clock.now());
    CHECK(batch.size() == 2);  // 60 tokens; a third would pass 64
    CHECK(s.queued_items() == 1);
  }
  SUBCASE("an item over the token budget goes alone") {
    BatchScheduler s(limits(100, 64, 1000000), clock);
    REQUIRE(s.submit(request(1, {500, 5})));
    const auto batch = s.take_due(clock.now());
    REQUIRE(batch.size() == 1);
    CHECK(batch[0].tokens == 500);
  }
}

TEST_CASE("past max_queue_items a request is refused whole, and after close()") {
  ManualClock clock;
  BatchScheduler s(limits(100, 1000, 1000, 5), clock);
  CHECK(s.submit(request(1, {1, 1, 1})));
  CHECK_FALSE(s.submit(request(2, {1, 1, 1})));  // 6 > 5: none of it queued
  CHECK(s.queued_items() == 3);
  CHECK(s.submit(request(3, {1, 1})));
  CHECK(s.queued_items() == 5);
  s.close();
  CHECK_FALSE(s.submit(request(4, {1})));
  // Closed: what is queued is due at once, and wait_batch drains, then ends.
  const auto batch = s.wait_batch();
  CHECK(batch.size() == 5);
  CHECK(s.wait_batch().empty());
}

TEST_CASE("wait_batch returns a batch a submit on another thread completes") {
  ManualClock clock;  // never advanced: only a full batch can be due
  BatchScheduler s(limits(2, 1000, 1000000), clock);
  REQUIRE(s.submit(request(1, {1})));
  std::thread producer([&] { s.submit(request(2, {1})); });
  const auto batch = s.wait_batch();
  producer.join();
  REQUIRE(batch.size() == 2);
  CHECK(batch[0].request != batch[1].request);
}
