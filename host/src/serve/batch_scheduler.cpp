#include "serve/batch_scheduler.hpp"

#include <utility>

namespace encgraph::host::serve {

BatchScheduler::BatchScheduler(BatchLimits limits, const Clock& clock)
    : limits_(limits), clock_(clock) {}

bool BatchScheduler::submit(std::vector<QueuedItem> items) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return false;
    if (static_cast<int64_t>(queue_.size() + items.size()) > limits_.max_queue_items) return false;
    const TimePoint now = clock_.now();
    for (QueuedItem& item : items) {
      item.enqueued = now;
      queued_tokens_ += item.tokens;
      queue_.push_back(std::move(item));
    }
  }
  changed_.notify_all();
  return true;
}

bool BatchScheduler::due_locked(TimePoint now) const {
  if (queue_.empty()) return false;
  return closed_ || static_cast<int64_t>(queue_.size()) >= limits_.max_items ||
         queued_tokens_ >= limits_.max_tokens || now >= queue_.front().enqueued + limits_.max_delay;
}

std::vector<QueuedItem> BatchScheduler::take_due(TimePoint now) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<QueuedItem> batch;
  if (!due_locked(now)) return batch;
  int64_t tokens = 0;
  while (!queue_.empty() && static_cast<int64_t>(batch.size()) < limits_.max_items) {
    const QueuedItem& next = queue_.front();
    if (!batch.empty() && tokens + next.tokens > limits_.max_tokens) break;
    tokens += next.tokens;
    queued_tokens_ -= next.tokens;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

std::optional<TimePoint> BatchScheduler::deadline() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  return queue_.front().enqueued + limits_.max_delay;
}

std::vector<QueuedItem> BatchScheduler::wait_batch() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (queue_.empty()) {
        if (closed_) return {};
        changed_.wait(lock, [&] { return closed_ || !queue_.empty(); });
        continue;
      }
      const TimePoint now = clock_.now();
      if (!due_locked(now)) {
        // Woken early by a submit (which may complete a batch) or by the deadline.
        changed_.wait_for(lock, queue_.front().enqueued + limits_.max_delay - now);
        continue;
      }
    }
    std::vector<QueuedItem> batch = take_due(clock_.now());
    if (!batch.empty()) return batch;
  }
}

void BatchScheduler::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

int64_t BatchScheduler::queued_items() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

}  // namespace encgraph::host::serve
