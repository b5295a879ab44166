// Which OpenBLAS kernels the CPU backend's products get.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels from CPUID once, when
// the library loads. A virtual machine that hides the CPU model makes it fall
// back to its oldest x86-64 kernels: on the H200 host ("Intel(R) Xeon(R)
// Processor", AVX-512) it chose Prescott (SSE3) and a 7B-width block ran at
// 17% of the FMA peak, against 59% with the SkylakeX kernels
// (scripts/gpu/steps.sh cpu_bench, docs/performance.md). The model plugins load
// OpenBLAS with them, so the runtime sets OPENBLAS_CORETYPE before the first
// plugin loads, from the instruction sets the CPU reports, unless the user set it.
#pragma once

namespace encgraph {

struct CpuFeatures {
  bool intel = false;
  bool avx512 = false;  // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
  bool avx2_fma = false;
};

// The features of this CPU (__builtin_cpu_supports).
CpuFeatures cpu_features();

// The OPENBLAS_CORETYPE for these features: "SkylakeX" (Intel, AVX-512),
// "Haswell" (Intel, AVX2 and FMA), or nullptr: leave OpenBLAS's own choice,
// which reads AMD CPUs by family (a VM keeps it) and gets them right.
const char* blas_coretype_for(const CpuFeatures& cpu);

// Sets OPENBLAS_CORETYPE from blas_coretype_for(cpu_features()) when it is
// unset; once per process, before OpenBLAS loads (later it has no effect).
// Returns the value OpenBLAS will read (the user's, ours, or nullptr).
const char* choose_blas_kernels();

}  // namespace encgraph
