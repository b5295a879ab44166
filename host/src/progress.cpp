#include "progress.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>

namespace encgraph::host {
namespace {

constexpr auto kTerminalPeriod = std::chrono::milliseconds(200);
constexpr auto kLogPeriod = std::chrono::seconds(5);

std::string duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%dh%02dm", int(s) / 3600, int(s) % 3600 / 60);
  return buf;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, bool interactive)
    : label_(std::move(label)),
      total_(total),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::Progress(std::string label, int64_t total)
    : Progress(std::move(label), total, ::isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() {
  finish();
}

std::string Progress::describe(int64_t done, int64_t total, double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%lld/%lld items, %.1f items/s", static_cast<long long>(done),
                static_cast<long long>(total), rate);
  std::string s = buf;
  if (done < total && rate > 0) s += ", ETA " + duration(static_cast<double>(total - done) / rate);
  return s;
}

void Progress::update(int64_t done) {
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total_;
  const std::chrono::steady_clock::duration period =
      interactive_ ? std::chrono::steady_clock::duration(kTerminalPeriod)
                   : std::chrono::steady_clock::duration(kLogPeriod);
  if (!last && now - last_ < period) return;
  last_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const std::string text = label_ + ": " + describe(done, total_, seconds);
  if (interactive_) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    drew_ = true;
  } else if (!last) {
    spdlog::info("{}", text);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (interactive_ && drew_) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
}

}  // namespace encgraph::host
