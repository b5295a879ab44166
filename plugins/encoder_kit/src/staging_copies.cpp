#include <encoder_kit/cpu_kernels.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cstring>

namespace encoder_kit {
namespace {

// Pieces small enough that 16 threads share an 11 MB request evenly, large
// enough that each chunk's claim costs nothing next to its copy.
constexpr size_t kPieceBytes = size_t{256} << 10;
// Below this a thread pool's wake-up (~10-20 µs) costs more than it saves.
constexpr size_t kParallelFrom = size_t{1} << 20;

}  // namespace

void StagingCopies::add(void* dst, const void* src, size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t at = 0; at < bytes; at += kPieceBytes)
    pieces_.push_back({d + at, s + at, std::min(kPieceBytes, bytes - at)});
  total_ += bytes;
}

void StagingCopies::run() {
  auto copy = [this](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const Piece& p = pieces_[static_cast<size_t>(k)];
      std::memcpy(p.dst, p.src, p.bytes);
    }
  };
  const auto n = static_cast<int64_t>(pieces_.size());
  if (total_ < kParallelFrom)
    copy(0, n);
  else
    cpu::pool().parallel_for(n, 1, [&](int64_t begin, int64_t end, int) { copy(begin, end); });
  pieces_.clear();
  total_ = 0;
}

}  // namespace encoder_kit
