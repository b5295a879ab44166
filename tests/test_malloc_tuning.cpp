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

TEST_CASE("otherwise glibc takes both thresholds, and large blocks still work") {
#if defined(__GLIBC__)
  CHECK(reuse_freed_memory("glibc.cpu.x86_ibt=on", nullptr, nullptr));
  CHECK(reuse_freed_memory(nullptr, nullptr, nullptr));
#else
  CHECK_FALSE(reuse_freed_memory(nullptr, nullptr, nullptr));
#endif
  // Blocks around and past the 32 MiB threshold are served and usable.
  for (size_t mb : {1, 31, 33}) {
    std::vector<unsigned char> block(mb << 20, 0x5A);
    CHECK(block.front() == 0x5A);
    CHECK(block.back() == 0x5A);
  }
}
