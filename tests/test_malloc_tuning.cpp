// The encgraph command's malloc tuning: applied unless the user tuned malloc.
#include <encgraph/malloc_tuning.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using encgraph::reuse_freed_memory;

TEST_CASE("a user's malloc settings win over the tuning") {
  CHECK_FALSE(reuse_freed_memory("glibc.malloc.trim_threshold=1", nullptr, nullptr));
  CHECK_FALSE(
      reuse_freed_memory("glibc.cpu.x86_ibt=on:glibc.malloc.arena_max=2", nullptr, nullptr));
  CHECK_FALSE(reuse_freed_memory(nullptr, "1048576", nullptr));
  CHECK_FALSE(reuse_freed_memory(nullptr, nullptr, "1048576"));
}

// AddressSanitizer's allocator replaces glibc's and refuses mallopt (returns 0).
#if defined(__SANITIZE_ADDRESS__)
#define MALLOC_IS_GLIBCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MALLOC_IS_GLIBCS 0
#endif
#endif
#ifndef MALLOC_IS_GLIBCS
#if defined(__GLIBC__)
#define MALLOC_IS_GLIBCS 1
#else
#define MALLOC_IS_GLIBCS 0
#endif
#endif

TEST_CASE("otherwise glibc takes both thresholds, and large blocks still work") {
  // With another allocator (a sanitizer's) nothing is tuned, and it says so.
  CHECK(reuse_freed_memory("glibc.cpu.x86_ibt=on", nullptr, nullptr) == bool(MALLOC_IS_GLIBCS));
  CHECK(reuse_freed_memory(nullptr, nullptr, nullptr) == bool(MALLOC_IS_GLIBCS));
  // Blocks around and past the 32 MiB threshold are served and usable.
  for (size_t mb : {1, 31, 33}) {
    std::vector<unsigned char> block(mb << 20, 0x5A);
    CHECK(block.front() == 0x5A);
    CHECK(block.back() == 0x5A);
  }
}
