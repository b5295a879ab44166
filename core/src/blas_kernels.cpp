#include <encgraph/blas_kernels.hpp>

#include <cstdlib>
#include <mutex>

namespace encgraph {

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.intel = __builtin_cpu_is("intel");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return f;
}

const char* blas_coretype_for(const CpuFeatures& cpu) {
  if (!cpu.intel) return nullptr;
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return nullptr;
}

const char* choose_blas_kernels() {
  static std::once_flag once;
  // setenv once, before any plugin (and OpenBLAS) is loaded. call_once only
  // orders the callers of this function, not other threads' getenv: the host's
  // main() and the Python module's import call it before threads exist; the
  // loader's call is the fallback for other embedders (then a no-op).
  std::call_once(once, [] {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
    if (const char* core = blas_coretype_for(cpu_features()))
      ::setenv("OPENBLAS_CORETYPE", core, 0);
  });
  return std::getenv("OPENBLAS_CORETYPE");
}

}  // namespace encgraph
