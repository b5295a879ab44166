#include <encoder_kit/thread_pool.hpp>

#include <encgraph/sdk/host.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

namespace encoder_kit {

int default_cpu_threads() {
  if (const char* option = encgraph::sdk::host().tuning_option("cpu_threads")) {
    char* end = nullptr;
    const long v = std::strtol(option, &end, 10);
    // The runtime checked it; a value that still does not read falls back to
    // the machine's count rather than failing a run.
    if (end && *end == '\0' && v > 0) return static_cast<int>(std::min(v, 1024L));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int threads) : size_(std::max(1, threads)) {
  workers_.reserve(static_cast<size_t>(size_ - 1));
  worker_ids_.reserve(static_cast<size_t>(size_ - 1));
  try {
    for (int i = 1; i < size_; ++i) {
      workers_.emplace_back([this, i] { worker_loop(i); });
      worker_ids_.push_back(workers_.back().get_id());
    }
  } catch (...) {
    // Could not start them all: run with the ones that did start.
    size_ = static_cast<int>(workers_.size()) + 1;
    worker_ids_.resize(workers_.size());
  }
}

int ThreadPool::slot_of_this_thread() const {
  // Not a thread_local: the pool lives in plugin libraries, and dynamic TLS
  // of a library that is later unloaded leaves LeakSanitizer (and any thread
  // outliving the unload) a dangling TLS block.
  const std::thread::id me = std::this_thread::get_id();
  if (caller_.load(std::memory_order_acquire) == me) return 0;
  for (size_t i = 0; i < worker_ids_.size(); ++i)
    if (worker_ids_[i] == me) return static_cast<int>(i) + 1;
  return -1;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(int slot) {
  for (;;) {
    if (failed_.load(std::memory_order_relaxed)) return;
    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) return;
    const int64_t begin = c * grain_;
    try {
      (*task_)(begin, std::min(n_, begin + grain_), slot);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
      return;
    }
  }
}

void ThreadPool::worker_loop(int slot) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks(slot);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const Task& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = (n + grain - 1) / grain;
  // From inside a chunk (a worker, or the caller running its share) it runs
  // inline: waiting on workers busy with the outer loop would deadlock.
  const int slot = slot_of_this_thread();
  if (slot >= 0 || size_ == 1 || chunks == 1) {
    for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain), std::max(slot, 0));
    return;
  }
  std::lock_guard<std::mutex> call(call_mutex_);
  caller_.store(std::this_thread::get_id(), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    n_ = n;
    grain_ = grain;
    chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    busy_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_chunks(0);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    task_ = nullptr;
    error = std::exchange(error_, nullptr);
  }
  caller_.store(std::thread::id(), std::memory_order_release);
  if (error) std::rethrow_exception(error);
}

}  // namespace encoder_kit
