// DeviceWeights: every array added lands, converted, at an aligned place of
// one allocation, whether the caller keeps it or hands over a temporary.
#include "gpu_test_util.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/plugin_host.hpp>  // kWorkspaceAlign
#include <encoder_kit/error.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace encoder_kit_test;
namespace k = encoder_kit::cuda;

namespace {

std::vector<float> random_floats(size_t n) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng());
  return v;
}

template <class T>
std::vector<T> read_back(const T* device, size_t n) {
  std::vector<T> host(n);
  if (n > 0) CUDA_OK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

GPU_TEST_CASE("DeviceWeights: bf16 and f32 arrays, kept or handed over, in one allocation") {
  const std::vector<float> kept_bf = random_floats(1000), kept_f32 = random_floats(77);
  std::vector<float> moved_bf = random_floats(3), moved_f32 = random_floats(129);
  const std::vector<float> moved_bf_copy = moved_bf, moved_f32_copy = moved_f32;
  const bf16 *a = nullptr, *c = nullptr, *e = nullptr;
  const float *b = nullptr, *d = nullptr;
  k::DeviceWeights w;
  w.add(&a, kept_bf);
  w.add(&b, kept_f32);
  w.add(&c, std::move(moved_bf));
  w.add(&d, std::move(moved_f32));
  w.add(&e, std::vector<float>{});  // an empty array still gets a place
  w.upload("test CUDA");
  for (const void* p :
       {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c),
        static_cast<const void*>(d), static_cast<const void*>(e)}) {
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % k::kWorkspaceAlign == 0);
  }
  const std::vector<bf16> got_a = read_back(a, kept_bf.size());
  for (size_t i = 0; i < kept_bf.size(); ++i) REQUIRE(to_f(got_a[i]) == round_bf(kept_bf[i]));
  const std::vector<bf16> got_c = read_back(c, moved_bf_copy.size());
  for (size_t i = 0; i < got_c.size(); ++i) REQUIRE(to_f(got_c[i]) == round_bf(moved_bf_copy[i]));
  CHECK(read_back(b, kept_f32.size()) == kept_f32);
  CHECK(read_back(d, moved_f32_copy.size()) == moved_f32_copy);
  // One allocation, laid out in the order added.
  CHECK(reinterpret_cast<uintptr_t>(b) > reinterpret_cast<uintptr_t>(a));
  CHECK(reinterpret_cast<uintptr_t>(e) > reinterpret_cast<uintptr_t>(d));
  bool refused = false;
  try {
    w.upload("test CUDA");
  } catch (const encoder_kit::Error& err) {
    refused = std::string(err.what()).find("test CUDA: the weights are uploaded once") !=
              std::string::npos;
  }
  CHECK(refused);
}
