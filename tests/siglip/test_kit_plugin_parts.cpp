// The kit pieces the ViT plugins (siglip, internvl, deepseek_ocr2) are built
// from, checked where a CUDA build cannot reach them through a plugin: the
// device backend of a build without CUDA kernels (its refusal and identity),
// dispatch to the CPU side, the size checks' messages, rows kept per dtype,
// checked parameter counts and the fused q/k/v read.
#include <encoder_kit/checked.hpp>
#include <encoder_kit/config.hpp>
#include <encoder_kit/device_backend.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/weights.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using encoder_kit::Error;

// What a test expects an Error to carry.
template <class F>
std::string message_of(F&& f, eg_status expected) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.status() == expected);
    return e.what();
  }
  FAIL("no error thrown");
  return {};
}

// A stand-in CUDA model: records which side ran.
struct FakeCuda {
  explicit FakeCuda(int v) : value(v) {}
  int value;
  int twice() const { return 2 * value; }
};

}  // namespace

TEST_CASE("a build without CUDA kernels refuses device cuda, naming the plugin") {
  using Backend = encoder_kit::DeviceBackend<std::vector<float>, encoder_kit::NoCuda>;
  static_assert(encoder_kit::kDevicesOf<encoder_kit::NoCuda> == EG_DEVICE_CPU);
  static_assert(encoder_kit::kDevicesOf<FakeCuda> == (EG_DEVICE_CPU | EG_DEVICE_CUDA));
  const std::string m = message_of([] { Backend("siglip", EG_DEVICE_CUDA); }, EG_ERR_UNSUPPORTED);
  CHECK(m == "siglip was built without its CUDA kernels; use device = \"cpu\"");

  Backend cpu("siglip", EG_DEVICE_CPU);
  cpu.hold_cpu({1.0f, 2.0f, 3.0f});
  const size_t n = cpu.run([](const std::vector<float>& w) { return w.size(); },
                           [](const auto&) { return size_t{0}; });
  CHECK(n == 3);
}

TEST_CASE("a build with CUDA runs the CUDA side once made, the CPU side otherwise") {
  using Backend = encoder_kit::DeviceBackend<int, FakeCuda>;
  Backend on_cpu("toy", EG_DEVICE_CPU);  // no refusal with kernels
  on_cpu.hold_cpu(5);
  CHECK(on_cpu.run([](int v) { return -v; }, [](const auto& m) { return m.twice(); }) == -5);
  Backend on_cuda("toy", EG_DEVICE_CUDA);
  on_cuda.make_cuda(21);
  CHECK(on_cuda.run([](int v) { return -v; }, [](const auto& m) { return m.twice(); }) == 42);
  CHECK(encoder_kit::gemm_tuning_cache(false, "/tmp/cache") == "off");
  CHECK(encoder_kit::gemm_tuning_cache(true, "/tmp/cache") == "/tmp/cache");
}

TEST_CASE("size checks name the plugin, the keys and the bound") {
  const encoder_kit::SizeChecks check{"internvl"};
  check.vit(64, 2, 4, 128, 448, 14);
  check.multiple("hidden_size", 64, "num_attention_heads", 4);
  CHECK(message_of([&] { check.multiple("hidden_size", 65, "num_attention_heads", 4); },
                   EG_ERR_INVALID_ARGUMENT) ==
        "internvl: hidden_size 65 is not a multiple of num_attention_heads 4");
  CHECK(message_of([&] { check.vit(64, 2, 4, 128, 448, 2048); }, EG_ERR_INVALID_ARGUMENT) ==
        "internvl: patch_size = 2048 is outside [1, 1024]");
  CHECK(message_of([&] { check.vit(64, 0, 4, 128, 448, 14); }, EG_ERR_INVALID_ARGUMENT) ==
        "internvl: num_hidden_layers = 0 is outside [1, 1024]");
}

TEST_CASE("rows are kept as f32 or rounded to bf16, the other vector empty") {
  const std::vector<float> rows = {1.0f, -2.5f, 1.0f + 1.0f / 256.0f};
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  encoder_kit::keep_rows(false, rows, f32, bf16);
  CHECK(f32 == rows);
  CHECK(bf16.empty());
  f32.clear();
  encoder_kit::keep_rows(true, rows, f32, bf16);
  CHECK(f32.empty());
  REQUIRE(bf16.size() == rows.size());
  CHECK(bf16[0] == 0x3f80);
  CHECK(bf16[1] == 0xc020);
  CHECK(bf16[2] == 0x3f80);  // 1 + 2^-8 is a tie: rounds to even
}

TEST_CASE("checked counts sum and multiply, naming what overflowed") {
  const encoder_kit::CheckedCount n{"siglip: the tower's parameter count"};
  CHECK(n.sum({n.mul({2, 3, 4}), 5}) == 29);
  const std::string m = message_of(
      [&] {
        n.mul({int64_t{1} << 40, int64_t{1} << 40});
      },
      EG_ERR_INVALID_ARGUMENT);
  CHECK(m.find("siglip: the tower's parameter count") != std::string::npos);
}

TEST_CASE("fused q/k/v: three projections in order, zeros without biases") {
  const encoder_kit::WeightSource random("random", 7);
  const std::string prefix = "vision_model.";
  const encoder_kit::PrefixedReader read{random, prefix};
  std::vector<float> w, b;
  encoder_kit::read_fused_qkv(read, "layer.", 4, /*bias=*/true, w, b);
  REQUIRE(w.size() == 48);
  REQUIRE(b.size() == 12);
  const std::vector<float> k =
      random.load("vision_model.layer.k_proj.weight", {4, 4}, encoder_kit::random_init::matrix(4));
  CHECK(std::vector<float>(w.begin() + 16, w.begin() + 32) == k);
  const std::vector<float> vb =
      random.load("vision_model.layer.v_proj.bias", {4}, encoder_kit::random_init::kBias);
  CHECK(std::vector<float>(b.begin() + 8, b.end()) == vb);

  std::vector<float> w2, b2;
  encoder_kit::read_fused_qkv(read, "layer.", 4, /*bias=*/false, w2, b2);
  CHECK(w2 == w);
  CHECK(b2 == std::vector<float>(12, 0.0f));
}
