// Helpers of the libFuzzer targets: the input as a file for readers that only
// take a path (an in-memory file, so nothing lands on disk), and the rule for
// exceptions: a parser may reject its input with the project's error types
// (encgraph::Error, encoder_kit::Error); anything else escaping is a finding, so the
// targets let it through to std::terminate, which libFuzzer reports.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuzz {

// One memfd reused by every run of the process; path() names it as
// /proc/self/fd/N, which open(), stat() and stdio all follow.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("encgraph-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the file's contents with the input.
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace fuzz
