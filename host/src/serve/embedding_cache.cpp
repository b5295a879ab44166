#include "serve/embedding_cache.hpp"

#include <utility>

namespace encgraph::host::serve {

size_t ItemOutputs::charge() const {
  // The vectors' and the map's own memory, roughly: keeps a flood of tiny
  // entries from holding far more than the budget says.
  size_t total = 128;
  for (const ItemOutput& o : outputs) total += o.bytes.size() + sizeof(ItemOutput);
  return total;
}

EmbeddingCache::EmbeddingCache(int64_t byte_budget) : budget_(byte_budget) {}

void EmbeddingCache::evict_for(size_t extra) {
  while (!lru_.empty() &&
         static_cast<size_t>(stats_.bytes) + extra > static_cast<size_t>(budget_)) {
    const Entry& last = lru_.back();
    stats_.bytes -= static_cast<int64_t>(last.charge);
    index_.erase(last.key);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

EmbeddingCache::Lookup EmbeddingCache::lookup(const CacheKey& key, CacheWaiter waiter) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.lookups;
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);  // now the most recently used
    ++stats_.hits;
    return {Found::Hit, it->second->item};
  }
  auto [flight, created] = in_flight_.try_emplace(key);
  flight->second.push_back(std::move(waiter));
  if (created) {
    ++stats_.misses;
    return {Found::Claimed, nullptr};
  }
  ++stats_.coalesced;
  return {Found::Joined, nullptr};
}

ItemPtr EmbeddingCache::find(const CacheKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  ++stats_.lookups;
  ++stats_.hits;
  return it->second->item;
}

std::vector<CacheWaiter> EmbeddingCache::take_waiters(const CacheKey& key) {
  std::vector<CacheWaiter> waiters;
  if (auto it = in_flight_.find(key); it != in_flight_.end()) {
    waiters = std::move(it->second);
    in_flight_.erase(it);
  }
  return waiters;
}

void EmbeddingCache::fulfil(const CacheKey& key, ItemPtr item) {
  std::vector<CacheWaiter> waiters;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiters = take_waiters(key);
    const size_t charge = item->charge();
    if (charge <= static_cast<size_t>(budget_) && index_.find(key) == index_.end()) {
      evict_for(charge);
      lru_.push_front({key, item, charge});
      index_[key] = lru_.begin();
      stats_.bytes += static_cast<int64_t>(charge);
    }
    stats_.entries = static_cast<int64_t>(lru_.size());
  }
  for (const CacheWaiter& w : waiters) w(item, nullptr);
}

void EmbeddingCache::fail(const CacheKey& key, std::exception_ptr error) {
  std::vector<CacheWaiter> waiters;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiters = take_waiters(key);
  }
  for (const CacheWaiter& w : waiters) w(nullptr, error);
}

void EmbeddingCache::replace(const CacheKey& key, const ItemPtr& expected, ItemPtr replacement) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = index_.find(key);
  if (it == index_.end() || it->second->item != expected) return;
  // Out of the list while the others make room, so that it is not evicted itself.
  Entry entry = std::move(*it->second);
  lru_.erase(it->second);
  index_.erase(it);
  stats_.bytes -= static_cast<int64_t>(entry.charge);
  entry.item = std::move(replacement);
  entry.charge = entry.item->charge();
  if (entry.charge <= static_cast<size_t>(budget_)) {
    evict_for(entry.charge);
    stats_.bytes += static_cast<int64_t>(entry.charge);
    lru_.push_front(std::move(entry));
    index_[key] = lru_.begin();
  } else {
    ++stats_.evictions;
  }
  stats_.entries = static_cast<int64_t>(lru_.size());
}

CacheStats EmbeddingCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace encgraph::host::serve
