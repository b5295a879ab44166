// The serve embedding cache: least-recently-used eviction that never holds
// more than its byte budget, hits that return the stored outputs, and
// in-flight deduplication (one computation per key; every waiter told of its
// result or its failure, the key claimable again after a failure).
#include "serve/embedding_cache.hpp"
#include "serve/infer_protocol.hpp"

#include <doctest/doctest.h>

#include <encgraph/plugin_api.h>

#include <cstring>
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

namespace {

// An item of one bf16 output holding `values`, stored under `key`.
ItemPtr bf16_item(const std::vector<uint16_t>& values, CacheKey key) {
  auto item = std::make_shared<ItemOutputs>();
  ItemOutput out;
  out.dtype = EG_DTYPE_BF16;
  out.rows = 1;
  out.width = static_cast<int64_t>(values.size());
  out.bytes.resize(values.size() * 2);
  std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  item->outputs.push_back(std::move(out));
  item->key = key;
  return item;
}

}  // namespace

TEST_CASE("widened_to_f32: every bf16 output widened bit for bit, others kept; null when none") {
  const std::vector<uint16_t> halves = {0x3F80, 0xC0B0, 0x7F80, 0xFF80, 0x0001, 0x8000, 0x7FC1};
  auto item = std::make_shared<ItemOutputs>(*bf16_item(halves, {3, 4}));
  ItemOutput f32;
  f32.dtype = EG_DTYPE_F32;
  f32.rows = 1;
  f32.width = 2;
  f32.bytes.assign(8, 0x5A);
  item->outputs.push_back(f32);
  const ItemPtr wide = widened_to_f32(*item);
  REQUIRE(wide);
  CHECK(wide->key == item->key);
  REQUIRE(wide->outputs.size() == 2);
  const ItemOutput& w = wide->outputs[0];
  CHECK(w.dtype == EG_DTYPE_F32);
  CHECK(w.rows == 1);
  CHECK(w.width == static_cast<int64_t>(halves.size()));
  REQUIRE(w.bytes.size() == 4 * halves.size());
  for (size_t i = 0; i < halves.size(); ++i) {  // NaN and infinities, zeros, subnormals
    uint32_t bits;
    std::memcpy(&bits, w.bytes.data() + 4 * i, 4);
    CHECK(bits == uint32_t{halves[i]} << 16);
  }
  CHECK(wide->outputs[1].bytes == f32.bytes);  // already f32: unchanged
  CHECK_FALSE(widened_to_f32(*wide));          // nothing left to widen
  CHECK(wide->charge() > item->charge());
}

TEST_CASE("replace: the widened form takes the entry's place within the budget") {
  const CacheKey a{9, 1}, b{9, 2}, c_key{9, 3};
  const ItemPtr small_a = bf16_item(std::vector<uint16_t>(400, 0x3F80), a);
  const size_t narrow = small_a->charge();
  const ItemPtr wide_a = widened_to_f32(*small_a);
  const size_t wide = wide_a->charge();
  // Room for the three narrow entries, not for one of them widened beside the others.
  EmbeddingCache c(static_cast<int64_t>(3 * narrow + narrow / 2));
  compute(c, b, bf16_item(std::vector<uint16_t>(400, 0x4000), b));
  compute(c, c_key, bf16_item(std::vector<uint16_t>(400, 0x4040), c_key));
  compute(c, a, small_a);
  REQUIRE(c.stats().bytes == static_cast<int64_t>(3 * narrow));
  c.replace(a, small_a, wide_a);
  // b, the least recently used, made room; a is stored widened.
  const CacheStats s = c.stats();
  CHECK(s.bytes == static_cast<int64_t>(narrow + wide));
  CHECK(s.bytes <= c.byte_budget());
  CHECK(s.entries == 2);
  CHECK(s.evictions == 1);
  CHECK(c.find(a) == wide_a);
  CHECK(c.find(c_key) != nullptr);
  CHECK(c.find(b) == nullptr);
  // Another form already there, or an absent key: nothing changes.
  c.replace(a, small_a, widened_to_f32(*small_a));
  CHECK(c.find(a) == wide_a);
  c.replace(b, small_a, wide_a);
  CHECK(c.find(b) == nullptr);
  CHECK(c.stats().bytes == static_cast<int64_t>(narrow + wide));
  // A replacement over the whole budget leaves the cache instead.
  EmbeddingCache tight(static_cast<int64_t>(narrow + narrow / 2));
  compute(tight, a, small_a);
  tight.replace(a, small_a, wide_a);
  CHECK(tight.find(a) == nullptr);
  CHECK(tight.stats().bytes == 0);
  CHECK(tight.stats().entries == 0);
}
