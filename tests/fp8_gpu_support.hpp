// The plugin suites' FP8 cases: whether this GPU has FP8 tensor cores
// (compute capability 8.9 or later). Without them precision = "fp8_linear"
// must be refused at start-up naming them, which is all such a GPU can check.
#pragma once

#include <encgraph/runtime.hpp>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

namespace encgraph::test {

// True on a GPU with FP8 tensor cores; elsewhere checks that a runtime of `rc`
// (a config with the key) is refused, and returns false.
inline bool fp8_gpu_or_refused(const encgraph::RuntimeConfig& rc) {
  int device = 0, major = 0, minor = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess);
  if (major * 10 + minor >= 89) return true;
  CHECK_THROWS_WITH(encgraph::Runtime{rc}, doctest::Contains("FP8 tensor cores"));
  return false;
}

}  // namespace encgraph::test
