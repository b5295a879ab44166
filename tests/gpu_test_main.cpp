// main() of the GPU suites: without a CUDA device the whole suite reports as
// skipped (exit 77, which ctest shows as "Skipped") with the reason, unless
// ENCGRAPH_REQUIRE_GPU=1 says a GPU must be there (then it fails).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "device_backend.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef ENCGRAPH_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#ifndef ENCGRAPH_TEST_MIN_GPUS
#define ENCGRAPH_TEST_MIN_GPUS 1
#endif

int main(int argc, char** argv) {
#ifdef ENCGRAPH_HAVE_CUDA
  // Suites that need several GPUs skip on smaller machines unless
  // ENCGRAPH_REQUIRE_GPUS says this many are there.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (ENCGRAPH_TEST_MIN_GPUS > 1 && count < ENCGRAPH_TEST_MIN_GPUS) {
    const char* required = std::getenv("ENCGRAPH_REQUIRE_GPUS");
    if (required && std::atoi(required) >= ENCGRAPH_TEST_MIN_GPUS) {
      std::fprintf(stderr, "FAIL: ENCGRAPH_REQUIRE_GPUS=%s but %d CUDA devices\n", required, count);
      return 1;
    }
    std::printf("skipped: needs %d CUDA devices, %d present\n", ENCGRAPH_TEST_MIN_GPUS, count);
    return 77;
  }
#endif
  if (!encgraph::cuda_device_available()) {
    const char* require = std::getenv("ENCGRAPH_REQUIRE_GPU");
    if (require && std::strcmp(require, "1") == 0) {
      std::fprintf(stderr, "FAIL: ENCGRAPH_REQUIRE_GPU=1 but no usable CUDA device\n");
      return 1;
    }
    std::printf(
        "skipped: no usable CUDA device on this machine (GPU suites run on the H200 via "
        "scripts/gpu-run-all.sh)\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
