// The serve embedding cache: least-recently-used eviction that never holds
// more than its byte budget, hits that return the stored outputs, and
// in-flight deduplication (one computation per key; every waiter told of its
// result or its failure, the key claimable again after a failure).
#include "serve/embedding_cache.hpp"

#include <doctest/doctest.h>

#include <random>
#include <stdexcept>

using namespace encgraph::host::serve;

namespace {

ItemPtr item_of(size_t bytes, uint8_t fill) {
  auto item = std::make_shared<ItemOutputs>();
  ItemOutput out;
  out.rows = 1;
  out.width = static_cast<int64_t>(bytes);
  out.bytes.assign(bytes, fill);
  item->outputs.push_back(std::move(out));
  return item;
}

CacheWaiter ignore() {
  return [](const ItemPtr&, const std::exception_ptr&) {};
}

// Computes `key` through the cache (it must be claimed).
void compute(EmbeddingCache& c, CacheKey key, ItemPtr item) {
  REQUIRE(c.lookup(key, ignore()).found == EmbeddingCache::Found::Claimed);
  c.fulfil(key, std::move(item));
}

// Ends a claimed key's computation: fulfilled, or failed when `fails`.
void compute_end(EmbeddingCache& c, CacheKey key, bool fails) {
  if (fails)
    c.fail(key, std::make_exception_ptr(std::runtime_error("refused")));
  else
    c.fulfil(key, item_of(100, static_cast<uint8_t>(key.low)));
}

}  // namespace

TEST_CASE("a fulfilled key is a hit with the same outputs") {
  EmbeddingCache c(1 << 20);
  const CacheKey key{1, 2};
  const ItemPtr item = item_of(100, 7);
  compute(c, key, item);
  const auto again = c.lookup(key, ignore());
  CHECK(again.found == EmbeddingCache::Found::Hit);
  CHECK(again.item == item);
  CHECK(c.lookup({1, 3}, ignore()).found == EmbeddingCache::Found::Claimed);  // another key
  const CacheStats s = c.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 2);
  CHECK(s.entries == 1);
  CHECK(s.bytes == static_cast<int64_t>(item->charge()));
}

TEST_CASE("the byte budget is never exceeded; the least recently used goes first") {
  const size_t entry = item_of(1000, 0)->charge();
  EmbeddingCache c(static_cast<int64_t>(3 * entry));
  compute(c, {0, 1}, item_of(1000, 1));
  compute(c, {0, 2}, item_of(1000, 2));
  compute(c, {0, 3}, item_of(1000, 3));
  CHECK(c.lookup({0, 1}, ignore()).found == EmbeddingCache::Found::Hit);  // 1 now most recent
  compute(c, {0, 4}, item_of(1000, 4));  // evicts 2, the least recently used
  CHECK(c.lookup({0, 2}, ignore()).found == EmbeddingCache::Found::Claimed);
  c.fail({0, 2}, nullptr);
  CHECK(c.lookup({0, 1}, ignore()).found == EmbeddingCache::Found::Hit);
  CHECK(c.lookup({0, 3}, ignore()).found == EmbeddingCache::Found::Hit);
  CHECK(c.stats().evictions == 1);
  // Random sizes, some over the whole budget: the bytes held never pass it.
  std::mt19937 rng(5);
  for (uint64_t k = 10; k < 400; ++k) {
    compute(c, {7, k}, item_of(std::uniform_int_distribution<size_t>(1, 4000)(rng), 0));
    const CacheStats s = c.stats();
    REQUIRE(s.bytes <= c.byte_budget());
    REQUIRE(s.bytes >= 0);
  }
  CHECK(c.stats().entries >= 1);
}

TEST_CASE("a budget of 0 stores nothing") {
  EmbeddingCache c(0);
  compute(c, {1, 1}, item_of(10, 1));
  CHECK(c.lookup({1, 1}, ignore()).found == EmbeddingCache::Found::Claimed);
  CHECK(c.stats().bytes == 0);
}

TEST_CASE("concurrent lookups of one key: one computes, every waiter gets its result") {
  EmbeddingCache c(1 << 20);
  const CacheKey key{9, 9};
  std::vector<ItemPtr> got(3);
  const auto waiter = [&](size_t i) {
    return [&got, i](const ItemPtr& item, const std::exception_ptr& error) {
      CHECK_FALSE(error);
      got[i] = item;
    };
  };
  CHECK(c.lookup(key, waiter(0)).found == EmbeddingCache::Found::Claimed);
  CHECK(c.lookup(key, waiter(1)).found == EmbeddingCache::Found::Joined);
  CHECK(c.lookup(key, waiter(2)).found == EmbeddingCache::Found::Joined);
  CHECK(got[0] == nullptr);  // nobody told before the computation ends
  const ItemPtr item = item_of(16, 3);
  c.fulfil(key, item);
  for (const ItemPtr& g : got) CHECK(g == item);
  CHECK(c.stats().misses == 1);
  CHECK(c.stats().coalesced == 2);
  CHECK(c.stats().hits == 0);  // waits on a computation are no hits
  CHECK(c.stats().lookups == 3);
  // Once stored, the same key is a hit, not a coalesced wait.
  CHECK(c.lookup(key, ignore()).found == EmbeddingCache::Found::Hit);
  CHECK(c.stats().hits == 1);
  CHECK(c.stats().coalesced == 2);
  CHECK(c.stats().lookups == 4);
}

TEST_CASE("every lookup counts as exactly one of hit, miss or coalesced") {
  // Random traffic over a budget that holds about a third of the keys: after
  // each lookup the three counters sum to the lookups, and each matches what
  // the lookup answered.
  EmbeddingCache c(3 * static_cast<int64_t>(item_of(100, 0)->charge()));
  std::mt19937 rng(11);
  CacheStats expected;
  std::vector<CacheKey> in_flight;
  for (int step = 0; step < 2000; ++step) {
    const CacheKey key{3, std::uniform_int_distribution<uint64_t>(0, 8)(rng)};
    const EmbeddingCache::Found found = c.lookup(key, ignore()).found;
    ++expected.lookups;
    if (found == EmbeddingCache::Found::Hit) ++expected.hits;
    if (found == EmbeddingCache::Found::Joined) ++expected.coalesced;
    if (found == EmbeddingCache::Found::Claimed) {
      ++expected.misses;
      in_flight.push_back(key);
    }
    // Computations end at random moments, some while others wait on them.
    if (!in_flight.empty() && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      const size_t k = std::uniform_int_distribution<size_t>(0, in_flight.size() - 1)(rng);
      compute_end(c, in_flight[k], k % 5 == 0);
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(k));
    }
    const CacheStats s = c.stats();
    REQUIRE(s.lookups == expected.lookups);
    REQUIRE(s.hits == expected.hits);
    REQUIRE(s.misses == expected.misses);
    REQUIRE(s.coalesced == expected.coalesced);
    REQUIRE(s.hits + s.misses + s.coalesced == s.lookups);
  }
  CHECK(expected.hits > 0);
  CHECK(expected.coalesced > 0);
  CHECK(c.stats().evictions > 0);
}

TEST_CASE("a failed computation reaches every waiter and frees the key") {
  EmbeddingCache c(1 << 20);
  const CacheKey key{4, 4};
  int errors = 0;
  const auto waiter = [&](const ItemPtr& item, const std::exception_ptr& error) {
    CHECK(item == nullptr);
    REQUIRE(error);
    try {
      std::rethrow_exception(error);
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "plugin refused it");
    }
    ++errors;
  };
  REQUIRE(c.lookup(key, waiter).found == EmbeddingCache::Found::Claimed);
  REQUIRE(c.lookup(key, waiter).found == EmbeddingCache::Found::Joined);
  c.fail(key, std::make_exception_ptr(std::runtime_error("plugin refused it")));
  CHECK(errors == 2);
  CHECK(c.lookup(key, ignore()).found == EmbeddingCache::Found::Claimed);
  CHECK(c.stats().entries == 0);
}

TEST_CASE("find: a stored key is a counted hit, an absent one counts nothing") {
  EmbeddingCache c(3 * static_cast<int64_t>(item_of(100, 0)->charge()));
  CHECK(c.find({5, 1}) == nullptr);
  CHECK(c.stats().lookups == 0);
  const ItemPtr item = item_of(100, 1);
  compute(c, {5, 1}, item);
  CHECK(c.find({5, 1}) == item);
  CHECK(c.stats().hits == 1);
  CHECK(c.stats().lookups == 2);  // compute's lookup, then find's
  // An in-flight key is not found (its waiters are the lookup's business).
  REQUIRE(c.lookup({5, 2}, ignore()).found == EmbeddingCache::Found::Claimed);
  CHECK(c.find({5, 2}) == nullptr);
  c.fulfil({5, 2}, item_of(100, 2));
  // find makes the key the most recently used: {5, 1} survives two more entries.
  CHECK(c.find({5, 1}) == item);
  compute(c, {5, 3}, item_of(100, 3));
  compute(c, {5, 4}, item_of(100, 4));
  CHECK(c.find({5, 1}) == item);
  CHECK(c.find({5, 2}) == nullptr);  // evicted: the least recently used
  const CacheStats s = c.stats();
  CHECK(s.hits + s.misses + s.coalesced == s.lookups);
}
