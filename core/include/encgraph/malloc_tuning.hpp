// How a process hosting encgraph keeps large freed blocks for reuse. Making an
// item allocates its rows (about 1.2 MB for a 224x224 Qwen-VL image) and frees
// them after the batch; glibc's defaults give a request's worth of such blocks
// back to the kernel each time, so every item pays fresh-page faults and the
// kernel's zeroing: three times the work of making it (bench_item_making).
// The encgraph command calls this first; a program embedding the runtime may.
#pragma once

namespace encgraph {

// Blocks up to 32 MiB come from the heap rather than their own mapping, and
// up to 128 MiB of freed heap stay for reuse (glibc's mallopt; fixed values
// replace its dynamic thresholds, which trim a request's blocks every time).
// Changes nothing and returns false when the user tuned malloc already
// (`glibc_tunables` names a glibc.malloc tunable, or the MALLOC_*_ variables
// are set) or the C library is not glibc; else returns true.
bool reuse_freed_memory(const char* glibc_tunables, const char* mmap_threshold_env,
                        const char* trim_threshold_env);
// The same, reading GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_ and
// MALLOC_TRIM_THRESHOLD_. Call before threads exist (getenv).
bool reuse_freed_memory();

}  // namespace encgraph
