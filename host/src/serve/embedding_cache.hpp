// The served embeddings cache: an item's outputs keyed by a 128-bit hash of its
// decoded pixels and of what else decides them (preprocessing, weights), kept
// in least-recently-used order within a byte budget, with in-flight
// deduplication: while one request computes a key, others asking for it wait
// for that result instead of encoding the same image again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace encgraph::host::serve {

struct CacheKey {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const CacheKey& o) const { return high == o.high && low == o.low; }
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return static_cast<size_t>(k.low ^ k.high); }
};

// One output of one item, as the engine produced it.
struct ItemOutput {
  int32_t dtype = 0;  // eg_dtype
  int64_t rows = 0;
  int64_t width = 0;
  std::vector<uint8_t> bytes;  // rows x width elements of dtype
};

// Every output of one item, in the model's output order.
struct ItemOutputs {
  std::vector<ItemOutput> outputs;
  CacheKey key;  // what the cache stores it under
  // What the entry costs the budget: its bytes plus a fixed overhead.
  size_t charge() const;
};

using ItemPtr = std::shared_ptr<const ItemOutputs>;

// Told of a key's outputs (error null) or of why they could not be made.
using CacheWaiter = std::function<void(const ItemPtr& item, const std::exception_ptr& error)>;

// Every lookup is exactly one of hits, misses or coalesced, so a hit rate is
// hits / lookups; coalesced lookups skip the engine too but were not answered
// from stored entries (the same image was still being encoded).
struct CacheStats {
  int64_t lookups = 0;    // hits + misses + coalesced
  int64_t hits = 0;       // answered from stored entries
  int64_t misses = 0;     // keys this cache had to have computed
  int64_t coalesced = 0;  // lookups that joined a computation already under way
  int64_t evictions = 0;
  int64_t entries = 0;
  int64_t bytes = 0;  // charged bytes stored, never above the budget
};

class EmbeddingCache {
 public:
  // byte_budget 0 stores nothing, but still deduplicates in-flight keys.
  explicit EmbeddingCache(int64_t byte_budget);

  enum class Found {
    Hit,      // `item` holds the outputs; the waiter is not called
    Joined,   // another caller computes the key; the waiter is called when it ends
    Claimed,  // the caller must compute the key and call fulfil or fail; the
              // waiter is called then, like every other
  };
  struct Lookup {
    Found found = Found::Claimed;
    ItemPtr item;
  };
  Lookup lookup(const CacheKey& key, CacheWaiter waiter);
  // The stored outputs of `key`, counted as a lookup and a hit (and made the
  // most recently used) when stored; null, counting nothing, when not: the
  // caller then makes a full lookup().
  ItemPtr find(const CacheKey& key);

  // The claimed key's outputs: stored when they fit the budget (evicting the
  // least recently used), then handed to every waiter (outside the lock).
  void fulfil(const CacheKey& key, ItemPtr item);
  // The claimed key could not be computed: every waiter gets `error`, nothing
  // is stored, and the next lookup claims the key again.
  void fail(const CacheKey& key, std::exception_ptr error);

  // Stores `replacement` for `key` where the entry still holds `expected`
  // (the same outputs in another form: widened_to_f32), charging its size:
  // older entries are evicted to keep the budget, and the entry itself goes
  // when it alone is over it. Nothing changes when the entry is gone or holds
  // something else (another thread replaced it first). Not a lookup.
  void replace(const CacheKey& key, const ItemPtr& expected, ItemPtr replacement);

  CacheStats stats() const;
  int64_t byte_budget() const { return budget_; }

 private:
  struct Entry {
    CacheKey key;
    ItemPtr item;
    size_t charge = 0;
  };
  std::vector<CacheWaiter> take_waiters(const CacheKey& key);
  // Evicts least recently used entries until `extra` more bytes fit the budget.
  void evict_for(size_t extra);

  const int64_t budget_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<CacheKey, std::list<Entry>::iterator, CacheKeyHash> index_;
  std::unordered_map<CacheKey, std::vector<CacheWaiter>, CacheKeyHash> in_flight_;
  CacheStats stats_;
};

}  // namespace encgraph::host::serve
