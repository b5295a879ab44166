#include "item_threads.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace encgraph {

int item_threads_for(int configured, bool concurrent, size_t items) {
  if (!concurrent || items < 2) return 1;
  int threads = configured;
  if (threads <= 0) threads = std::min(8, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, std::min(threads, static_cast<int>(items)));
}

void for_each_index(size_t n, int threads, const std::function<void()>& enter,
                    const std::function<void(size_t)>& body) {
  if (threads <= 1 || n < 2) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex failure_mutex;
  size_t failed_index = n;
  std::exception_ptr failure;
  auto work = [&] {
    for (;;) {
      if (stop.load(std::memory_order_relaxed)) return;
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (i < failed_index) {
          failed_index = i;
          failure = std::current_exception();
        }
        stop = true;
      }
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t)
    helpers.emplace_back([&] {
      try {
        enter();
      } catch (...) {
        // Reported unless an item failed too (an item's error names it).
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
        return;
      }
      work();
    });
  work();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace encgraph
