// The server's counters, rendered in the Prometheus text format at /metrics.
// Lock-free counters updated from any thread; per-model cache figures are
// read from the caches when rendered.
#pragma once

#include "serve/embedding_cache.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace encgraph::host::serve {

// Where a model's worker thread spends its time, batch by batch: making the
// items (the plugin's preprocessing), enqueueing them on the device, waiting
// for the rows and copying them out, handing them to the requests.
enum class WorkerPhase { Prepare, Execute, Collect, Answer };
inline constexpr std::array<const char*, 4> kWorkerPhaseNames = {"prepare", "execute", "collect",
                                                                 "answer"};

class ServeMetrics {
 public:
  void count_worker(WorkerPhase phase, double seconds) {
    worker_nanos_[static_cast<size_t>(phase)] += static_cast<int64_t>(seconds * 1e9);
  }
  // A request answered with `status` after `seconds`.
  void count_request(int status, double seconds);
  // A batch handed to the engine: its items and how many requests they came from.
  void count_batch(int64_t items, int64_t requests);
  // An item's wait in the queue before its batch ran.
  void count_queue_wait(double seconds);
  // Items the engine could not make or run (plugin or device errors).
  void count_item_errors(int64_t items) { item_errors_ += items; }
  // A batch of several items that failed and is run again item by item.
  void count_batch_split() { ++batches_split_; }
  int64_t batches_split() const { return batches_split_; }
  void set_queued_items(int64_t items) { queued_items_ = items; }
  // A request whose every image was a cache hit: the server's time from the
  // request in hand (body read, not parsed) to its response built (before
  // the socket write), the server's own overhead per hit.
  void count_cache_only_request(double seconds);

  // The histogram's upper bounds in seconds (a last +Inf bucket follows).
  static constexpr std::array<double, 12> kServiceBuckets = {
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3};

  struct ModelCache {
    std::string model;
    CacheStats stats;
    int64_t budget = 0;
  };
  // The Prometheus text: every counter, and each model's cache figures.
  std::string render(const std::vector<ModelCache>& caches) const;

  int64_t batches_multi_request() const { return batches_multi_request_; }

 private:
  static constexpr std::array<int, 10> kStatuses = {200, 400, 404, 408, 413, 429, 500, 503, 504, 0};
  std::array<std::atomic<int64_t>, kStatuses.size()> requests_{};
  std::atomic<int64_t> request_micros_{0};
  std::atomic<int64_t> batches_{0};
  std::atomic<int64_t> batch_items_{0};
  std::atomic<int64_t> batches_multi_request_{0};
  std::atomic<int64_t> queue_waits_{0};
  std::atomic<int64_t> queue_wait_micros_{0};
  std::atomic<int64_t> item_errors_{0};
  std::atomic<int64_t> batches_split_{0};
  std::atomic<int64_t> queued_items_{0};
  std::array<std::atomic<int64_t>, kServiceBuckets.size() + 1> cache_only_buckets_{};
  std::atomic<int64_t> cache_only_nanos_{0};
  std::array<std::atomic<int64_t>, kWorkerPhaseNames.size()> worker_nanos_{};
};

}  // namespace encgraph::host::serve
