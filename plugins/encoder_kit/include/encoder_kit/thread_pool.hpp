// A fixed pool of worker threads for the fp32 CPU kernels: created once,
// reused by every parallel pass, joined on destruction.
//
// The threading rule of the CPU path (see docs/architecture.md):
// - BLAS products are called from the caller's thread while the pool is idle,
//   with OpenBLAS set to the pool's thread count (cpu::pool() does that);
// - pool tasks never call BLAS (attention has its own products), so the two
//   never run at once and never oversubscribe the cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace encoder_kit {

// Threads the CPU path uses: the runtime's tuning option cpu_threads
// ([plugin.tuning]) when set, else the CPUs this process may run on
// (sched_getaffinity), else std::thread::hardware_concurrency(); at least 1.
// The process's pool is sized by the first call (cpu_kernels.hpp's pool()).
int default_cpu_threads();

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started (at least 1 in all).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Calls fn(begin, end, slot) over [0, n) in chunks of `grain` items (the last
  // may be shorter), each chunk exactly once; slot in [0, size()) is unique
  // among the chunks running at once, for per-thread scratch. Returns when all
  // chunks are done. The first exception a chunk throws stops the claiming of
  // further chunks and is rethrown here. Called from inside a chunk (or with
  // one chunk, or a pool of 1), it runs inline on the calling thread.
  using Task = std::function<void(int64_t begin, int64_t end, int slot)>;
  void parallel_for(int64_t n, int64_t grain, const Task& fn);

 private:
  void worker_loop(int slot);
  void run_chunks(int slot);
  // The slot of the calling thread while it runs chunks of this pool (0: the
  // thread inside parallel_for, 1..: a worker), else -1.
  int slot_of_this_thread() const;

  int size_;
  std::vector<std::thread> workers_;
  std::vector<std::thread::id> worker_ids_;  // workers_[i]'s id, set before any job
  // The thread inside parallel_for while a job runs (none otherwise).
  std::atomic<std::thread::id> caller_{};
  std::mutex call_mutex_;  // one parallel_for at a time from outside the pool
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  int busy_ = 0;  // workers still in the current job
  bool stop_ = false;
  // The current job, published under mutex_ with generation_.
  const Task* task_ = nullptr;
  int64_t n_ = 0, grain_ = 1, chunks_ = 0;
  std::atomic<int64_t> next_{0};  // next chunk to claim
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

}  // namespace encoder_kit
