// Collects the items of concurrent requests into batches for the engine: a
// batch is due when the queue holds a batch's worth of items or tokens, or
// when its oldest item has waited max_delay. Time comes from an injected
// Clock, so the deadline logic is tested without waiting. Requests are taken
// whole or refused (the caller answers 429) past max_queue_items.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace encgraph::host::serve {

using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

struct QueuedItem {
  uint64_t request = 0;        // the request it came from (batches mixing requests are counted)
  int64_t tokens = 0;          // rows it adds to a batch (the plugin's output tokens)
  TimePoint enqueued{};        // set by submit
  std::shared_ptr<void> work;  // the caller's payload (pixels, cache key, ...)
};

struct BatchLimits {
  int64_t max_items = 32;                     // a batch's items
  int64_t max_tokens = 8192;                  // a batch's tokens (the largest budget)
  std::chrono::microseconds max_delay{2000};  // the oldest item's longest wait
  int64_t max_queue_items = 1024;             // queued items; past it submit refuses
};

class BatchScheduler {
 public:
  BatchScheduler(BatchLimits limits, const Clock& clock);

  // Queues a request's items, all or none: false when they would take the
  // queue past max_queue_items, or after close().
  bool submit(std::vector<QueuedItem> items);

  // The next batch, in arrival order, when one is due at `now` (empty when
  // none is): at most max_items items and max_tokens tokens (an item larger
  // than max_tokens goes alone). After close() whatever is queued is due.
  std::vector<QueuedItem> take_due(TimePoint now);

  // When the queued items' batch falls due by its deadline; empty when the
  // queue is empty.
  std::optional<TimePoint> deadline() const;

  // Blocks until a batch is due and returns it; empty once closed and drained.
  std::vector<QueuedItem> wait_batch();

  // Refuses new items; queued ones are still handed out.
  void close();

  int64_t queued_items() const;

 private:
  bool due_locked(TimePoint now) const;

  const BatchLimits limits_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<QueuedItem> queue_;
  int64_t queued_tokens_ = 0;
  bool closed_ = false;
};

}  // namespace encgraph::host::serve
