// Progress of a long run: on a terminal, one line rewritten in place (items
// done, rate, ETA); otherwise a log line every few seconds, so that logs stay
// readable when stderr is a file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace encgraph::host {

class Progress {
 public:
  // `interactive`: rewrite a line on stderr; otherwise log through spdlog.
  Progress(std::string label, int64_t total, bool interactive);
  // Decides by whether stderr is a terminal.
  Progress(std::string label, int64_t total);
  ~Progress();

  void update(int64_t done);
  void finish();

  // "12/64 items, 3.4 items/s, ETA 14s" (exposed for tests).
  static std::string describe(int64_t done, int64_t total, double seconds);

 private:
  std::string label_;
  int64_t total_;
  bool interactive_;
  bool finished_ = false;
  bool drew_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace encgraph::host
