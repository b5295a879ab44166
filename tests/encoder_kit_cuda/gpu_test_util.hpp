// Helpers for the CUDA kernel suites: skip-or-fail without a device, device
// buffers, bf16 conversions, NaN poisoning and tolerance checks.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace encoder_kit_test {

using bf16 = __nv_bfloat16;

// Why GPU cases cannot run here; empty when a device is present.
inline const std::string& gpu_unavailable_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
      return std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    if (n == 0) return std::string("no CUDA device");
    return std::string();
  }();
  return reason;
}

inline bool gpu_required() {
  const char* v = std::getenv("ENCGRAPH_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// doctest::skip argument of every GPU case: skip without a device unless
// ENCGRAPH_REQUIRE_GPU=1 (then the case runs and fails in require_gpu()).
inline bool skip_gpu() {
  const bool skip = !gpu_unavailable_reason().empty() && !gpu_required();
  static bool told = false;
  if (skip && !told) {
    told = true;
    std::fprintf(stderr, "test_encoder_kit_cuda: GPU cases skipped: %s\n",
                 gpu_unavailable_reason().c_str());
  }
  return skip;
}

inline void require_gpu() {
  REQUIRE_MESSAGE(gpu_unavailable_reason().empty(),
                  "ENCGRAPH_REQUIRE_GPU=1 but " << gpu_unavailable_reason());
}

#define GPU_TEST_CASE(name) TEST_CASE(name* doctest::skip(::encoder_kit_test::skip_gpu()))

#define CHECK_OK(expr)                                                                  \
  do {                                                                                  \
    const int encoder_kit_rc_ = (expr);                                                 \
    REQUIRE_MESSAGE(encoder_kit_rc_ == 0,                                               \
                    #expr << " -> " << encoder_kit_rc_ << " "                           \
                          << ::encoder_kit::cuda::error_string(encoder_kit_rc_) << " (" \
                          << ::encoder_kit::cuda::last_error_detail() << ")");          \
  } while (0)

#define CUDA_OK(expr)                                                       \
  do {                                                                      \
    const cudaError_t encoder_kit_e_ = (expr);                              \
    REQUIRE_MESSAGE(encoder_kit_e_ == cudaSuccess,                          \
                    #expr << " -> " << cudaGetErrorString(encoder_kit_e_)); \
  } while (0)

// A cuBLASLt handle for one test case.
struct LtHandle {
  cublasLtHandle_t h = nullptr;
  LtHandle() { REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~LtHandle() { cublasLtDestroy(h); }
};

// Owning device allocation of n elements of T.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0) CUDA_OK(cudaMalloc(&p_, n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    REQUIRE(v.size() <= n_);
    CUDA_OK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    CUDA_OK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  // All bits set: NaN for bf16 and float, -1 for integers.
  void poison() { CUDA_OK(cudaMemset(p_, 0xff, n_ * sizeof(T))); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// A fresh seed per run (printed on failure), so each run checks new inputs.
inline std::mt19937& rng() {
  static std::mt19937 gen = [] {
    const unsigned seed = std::random_device{}();
    std::fprintf(stderr, "test_encoder_kit_cuda: random seed %u\n", seed);
    return std::mt19937(seed);
  }();
  return gen;
}

inline float to_f(bf16 v) {
  return __bfloat162float(v);
}
inline bf16 to_bf(float v) {
  return __float2bfloat16(v);
}
inline double round_bf(double v) {
  return to_f(to_bf(static_cast<float>(v)));
}

// n values mean + scale * N(0, 1), rounded to bf16.
inline std::vector<bf16> random_bf16(size_t n, float scale = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = to_bf(mean + scale * d(rng()));
  return v;
}

inline std::vector<double> to_double(const std::vector<bf16>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = to_f(v[i]);
  return d;
}

struct Comparison {
  size_t checked = 0, nan = 0, outside = 0, worst = 0;
  double rel_l2 = 0.0, max_err = 0.0;
};

// Compares got[i] with ref[i] for the indices where want(i) holds:
// |got - ref| <= atol + rtol * scale_i, plus the relative L2 error. scale_i is
// |ref[i]|, or (*magnitude)[i] where a sum cancels: rounding errors follow the
// size of the terms, not of the result.
template <typename Want>
Comparison compare(const std::vector<bf16>& got, const std::vector<double>& ref, double rtol,
                   double atol, Want want, const std::vector<double>* magnitude = nullptr) {
  Comparison c;
  double diff2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!want(i)) continue;
    ++c.checked;
    const double g = to_f(got[i]);
    if (!std::isfinite(g)) {
      ++c.nan;
      continue;
    }
    const double e = std::fabs(g - ref[i]);
    diff2 += e * e;
    ref2 += ref[i] * ref[i];
    const double scale = magnitude != nullptr ? (*magnitude)[i] : std::fabs(ref[i]);
    if (e > atol + rtol * scale) ++c.outside;
    if (e > c.max_err) {
      c.max_err = e;
      c.worst = i;
    }
  }
  c.rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

inline Comparison compare(const std::vector<bf16>& got, const std::vector<double>& ref, double rtol,
                          double atol) {
  return compare(got, ref, rtol, atol, [](size_t) { return true; });
}

inline double rms(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// Every checked element written (no NaN), within tolerance, L2 error small.
#define CHECK_CLOSE(cmp, l2_limit)                                                      \
  do {                                                                                  \
    const ::encoder_kit_test::Comparison& c_ = (cmp);                                   \
    INFO("checked " << c_.checked << ", NaN " << c_.nan << ", outside " << c_.outside   \
                    << ", rel L2 " << c_.rel_l2 << ", max err " << c_.max_err << " at " \
                    << c_.worst);                                                       \
    CHECK(c_.checked > 0);                                                              \
    CHECK(c_.nan == 0);                                                                 \
    CHECK(c_.outside == 0);                                                             \
    CHECK(c_.rel_l2 < (l2_limit));                                                      \
  } while (0)

}  // namespace encoder_kit_test
