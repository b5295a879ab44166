// A rank's stream-ordered allocation, freed on scope exit: a rank that throws
// must not strand blocks in the result pool, which keeps its memory for the
// life of the process.
#pragma once

#include "device_backend.hpp"

#include <algorithm>
#include <utility>

namespace encgraph {

class RankBlock {
 public:
  RankBlock() = default;
  RankBlock(DeviceBackend& backend, size_t bytes, const char* what)
      : backend_(&backend), p_(backend.alloc_async(std::max<size_t>(bytes, 1), what)) {}
  RankBlock(RankBlock&& o) noexcept : backend_(o.backend_), p_(std::exchange(o.p_, nullptr)) {}
  RankBlock& operator=(RankBlock&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = o.backend_;
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  RankBlock(const RankBlock&) = delete;
  RankBlock& operator=(const RankBlock&) = delete;
  ~RankBlock() { reset(); }

  char* get() const { return static_cast<char*>(p_); }
  // Gives the memory up without freeing it: a transfer that failed may still
  // write into it (the process is about to end).
  void release() noexcept { p_ = nullptr; }

 private:
  void reset() noexcept {
    if (p_) backend_->free_async(std::exchange(p_, nullptr));  // device-scoped, noexcept
  }
  DeviceBackend* backend_ = nullptr;
  void* p_ = nullptr;
};

}  // namespace encgraph
