// The copies that fill a batch's host staging (the runtime's pinned buffers),
// run at once on the process's thread pool when they are large. One thread
// moves about 10 GB/s into pinned memory; a request of 16 images at 224²
// stages ~11 MB, and a request waits for its staging before its upload and
// replay, so on one thread the copy alone is ~10% of such a request.
#pragma once

#include <cstddef>
#include <vector>

namespace encoder_kit {

class StagingCopies {
 public:
  // Queues `bytes` from src to dst (regions must not overlap).
  void add(void* dst, const void* src, size_t bytes);
  // Runs every queued copy, in parallel from 1 MiB in total, and clears the
  // queue. Returns once all bytes are in place.
  void run();

  size_t queued_bytes() const { return total_; }

 private:
  struct Piece {
    char* dst;
    const char* src;
    size_t bytes;
  };
  std::vector<Piece> pieces_;
  size_t total_ = 0;
};

}  // namespace encoder_kit
