#include <encgraph/malloc_tuning.hpp>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace encgraph {

bool reuse_freed_memory(const char* glibc_tunables, const char* mmap_threshold_env,
                        const char* trim_threshold_env) {
  if (glibc_tunables && std::strstr(glibc_tunables, "glibc.malloc.")) return false;
  if (mmap_threshold_env || trim_threshold_env) return false;
#if defined(__GLIBC__)
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit targets.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 128 << 20;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

bool reuse_freed_memory() {
  return reuse_freed_memory(std::getenv("GLIBC_TUNABLES"), std::getenv("MALLOC_MMAP_THRESHOLD_"),
                            std::getenv("MALLOC_TRIM_THRESHOLD_"));
}

}  // namespace encgraph
