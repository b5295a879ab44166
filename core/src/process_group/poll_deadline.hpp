// A deadline for polling loops: waits on MPI and NCCL are nonblocking calls
// tested until they finish, so that no wait outlives distributed.timeout_s.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace encgraph {

class PollDeadline {
 public:
  explicit PollDeadline(double seconds)
      : end_(std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(std::max(seconds, 0.0)))) {}
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }
  // Sleeps a little between tests: spins at first (control messages answer in
  // microseconds), then backs off to a millisecond so a long wait costs no CPU.
  void pause() const {
    if (polls_ < 64) {
      ++polls_;
      std::this_thread::yield();
      return;
    }
    sleep_us_ = std::min(sleep_us_ * 2, 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }

 private:
  std::chrono::steady_clock::time_point end_;
  mutable int polls_ = 0;
  mutable int sleep_us_ = 10;
};

// "300 s", "2.5 s".
inline std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

}  // namespace encgraph
