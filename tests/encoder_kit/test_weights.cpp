// Weight sources: a checkpoint's NaN or infinite values are an error naming
// the tensor, the file and the element (opt-out: check_finite = false), for
// every float dtype; random weights need no file; sizes are checked.
#include "kit_test_support.hpp"

#include <encoder_kit/fp8.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/safetensors.hpp>
#include <encoder_kit/weights.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using kit_test::contains;
using kit_test::failure_of;

// `values` stored as `dtype` (F32, BF16 or F16).
encoder_kit::TensorToWrite tensor(const std::string& name, encoder_kit::StDtype dtype,
                                  const std::vector<float>& values) {
  const std::vector<int64_t> shape = {static_cast<int64_t>(values.size())};
  if (dtype == encoder_kit::StDtype::F32) return encoder_kit::f32_tensor(name, shape, values);
  if (dtype == encoder_kit::StDtype::BF16) return encoder_kit::bf16_tensor(name, shape, values);
  encoder_kit::TensorToWrite t{name, encoder_kit::StDtype::F16, shape,
                               std::vector<std::byte>(values.size() * 2)};
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = encoder_kit::f32_to_f16(values[i]);
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  return t;
}

std::vector<float> random_values(size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(kit_test::uniform(-1000, 1000)) / 100.0f;
  return v;
}

}  // namespace

TEST_CASE("a NaN or infinity anywhere in a float tensor is found and named") {
  kit_test::TempDir dir("kit-w");
  const auto file = dir.path() / "m.safetensors";
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY};
  const char* names[] = {"NaN", "NaN", "+Inf", "-Inf"};
  for (encoder_kit::StDtype dtype :
       {encoder_kit::StDtype::F32, encoder_kit::StDtype::BF16, encoder_kit::StDtype::F16}) {
    for (int round = 0; round < 8; ++round) {
      const size_t n = static_cast<size_t>(kit_test::uniform(1, 5000));
      std::vector<float> values = random_values(n);
      const size_t at = static_cast<size_t>(kit_test::uniform(0, static_cast<int64_t>(n) - 1));
      const int which = static_cast<int>(kit_test::uniform(0, 3));
      values[at] = specials[which];
      if (kit_test::uniform(0, 1) && at + 1 < n) values[n - 1] = INFINITY;  // a later one too
      encoder_kit::write_safetensors(file,
                                     {tensor("ok", dtype, random_values(7)),
                                      tensor("visual.blocks.0.attn.qkv.weight", dtype, values)});
      CAPTURE(encoder_kit::st_dtype_name(dtype));
      CAPTURE(n);
      CAPTURE(at);
      const encoder_kit::WeightSource checked(file.string(), 0);
      CHECK(checked.load("ok", {7}, encoder_kit::RandomInit::normal(1)).size() == 7);
      const kit_test::Failure f = failure_of([&] {
        checked.load("visual.blocks.0.attn.qkv.weight", {static_cast<int64_t>(n)},
                     encoder_kit::RandomInit::normal(1));
      });
      CHECK(f.thrown);
      CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
      CHECK(contains(f.message, "tensor 'visual.blocks.0.attn.qkv.weight'"));
      CHECK(contains(f.message, file.string()));
      CHECK(contains(f.message, std::string("holds ") + names[which] + " at element " +
                                    std::to_string(at) + " of " + std::to_string(n)));
      CHECK(contains(f.message, "check_finite = false"));
      // Opted out, the values load as stored.
      const encoder_kit::WeightSource unchecked(file.string(), 0, /*check_finite=*/false);
      const std::vector<float> got =
          unchecked.load("visual.blocks.0.attn.qkv.weight", {static_cast<int64_t>(n)},
                         encoder_kit::RandomInit::normal(1));
      CHECK(std::isnan(got[at]) == std::isnan(specials[which]));
      CHECK(std::isinf(got[at]) == std::isinf(specials[which]));
    }
  }
}

TEST_CASE("finite values convert exactly from every float dtype") {
  kit_test::TempDir dir("kit-w");
  const auto file = dir.path() / "m.safetensors";
  std::vector<float> values = random_values(1000);
  // Extremes of each dtype: subnormal, largest finite, signed zero.
  values.insert(values.end(), {0.0f, -0.0f, 5.9604645e-08f, 6.1035156e-05f, 65504.0f, -65504.0f,
                               3.0e38f, std::numeric_limits<float>::denorm_min()});
  encoder_kit::write_safetensors(file,
                                 {tensor("f32", encoder_kit::StDtype::F32, values),
                                  tensor("bf16", encoder_kit::StDtype::BF16, values),
                                  tensor("f16", encoder_kit::StDtype::F16,
                                         std::vector<float>(values.begin(), values.end() - 2))});
  auto store = encoder_kit::TensorStore::open(file);
  const int64_t n = static_cast<int64_t>(values.size());
  const auto f32 = encoder_kit::read_as_f32(store->get("f32"), {n});
  const auto bf16 = encoder_kit::read_as_f32(store->get("bf16"), {n});
  const auto f16 = encoder_kit::read_as_f32(store->get("f16"), {n - 2});
  for (int64_t i = 0; i < n; ++i) {
    CHECK(std::memcmp(&f32[i], &values[i], 4) == 0);
    CHECK(bf16[i] == encoder_kit::bf16_to_f32(encoder_kit::f32_to_bf16(values[i])));
    if (i < n - 2) CHECK(f16[i] == encoder_kit::f16_to_f32(encoder_kit::f32_to_f16(values[i])));
  }
}

TEST_CASE("a tensor of another dtype or shape is refused naming both") {
  kit_test::TempDir dir("kit-w");
  const auto file = dir.path() / "m.safetensors";
  encoder_kit::TensorToWrite ints{"ids", encoder_kit::StDtype::I32, {2}, std::vector<std::byte>(8)};
  encoder_kit::write_safetensors(file, {ints, tensor("w", encoder_kit::StDtype::F32, {1, 2, 3})});
  const encoder_kit::WeightSource src(file.string(), 0);
  kit_test::Failure f =
      failure_of([&] { src.load("ids", {2}, encoder_kit::RandomInit::normal(1)); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "has dtype I32; weights must be F32, BF16 or F16"));
  f = failure_of([&] { src.load("w", {4}, encoder_kit::RandomInit::normal(1)); });
  CHECK(contains(f.message, "has shape [3], expected [4]"));
  f = failure_of([&] { src.load("absent", {4}, encoder_kit::RandomInit::normal(1)); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "tensor 'absent' is missing from plugin.weights file"));
}

TEST_CASE("sizes: overflowing random-weight shapes and towers beyond memory are refused") {
  const encoder_kit::WeightSource random("random", 1);
  const kit_test::Failure f = failure_of([&] {
    random.load("w", {int64_t{1} << 40, int64_t{1} << 40}, encoder_kit::RandomInit::normal(1));
  });
  CHECK(contains(f.message, "the element count of w overflows 64 bits"));
  CHECK_NOTHROW(encoder_kit::require_weights_fit(1 << 20, "tower"));
  const kit_test::Failure big = failure_of([] {
    encoder_kit::require_weights_fit(int64_t{1} << 60, "qwen2_5_vl: the tower (depth 9)");
  });
  CHECK(big.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(big.message, "qwen2_5_vl: the tower (depth 9) needs"));
  CHECK(contains(big.message, "more than this machine's"));
  CHECK(
      contains(failure_of([] { encoder_kit::require_weights_fit(int64_t{1} << 62, "t"); }).message,
               "overflows 64 bits"));
}

namespace {

// An F8_E4M3 tensor of the given codes.
encoder_kit::TensorToWrite e4m3_tensor(const std::string& name, const std::vector<int64_t>& shape,
                                       const std::vector<uint8_t>& codes) {
  encoder_kit::TensorToWrite t{name, encoder_kit::StDtype::F8E4M3, shape,
                               std::vector<std::byte>(codes.size())};
  std::memcpy(t.bytes.data(), codes.data(), codes.size());
  return t;
}

}  // namespace

TEST_CASE("an FP8 checkpoint's weights load as code x scale, per tensor or per row") {
  kit_test::TempDir dir("kit-w");
  const auto file = dir.path() / "fp8.safetensors";
  const int64_t rows = 6, cols = 40;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (auto& c : codes) {  // any finite code, both signs
    c = static_cast<uint8_t>(kit_test::uniform(0, 255));
    if ((c & 0x7f) == 0x7f) c = 0x7e;
  }
  codes[0] = 0x7e;  // 448
  std::vector<float> row_scales = random_values(static_cast<size_t>(rows));
  for (float& s : row_scales) s = std::fabs(s) / 448.0f + 1e-3f;
  const float tensor_scale = 0.0125f;
  encoder_kit::write_safetensors(
      file, {e4m3_tensor("a.weight", {rows, cols}, codes),
             encoder_kit::f32_tensor("a.weight_scale", {rows, 1}, row_scales),
             e4m3_tensor("b.weight", {rows, cols}, codes),
             encoder_kit::bf16_tensor("b.weight_scale", {}, {tensor_scale}),
             e4m3_tensor("c.weight", {rows, cols}, codes),  // no scale
             e4m3_tensor("d.weight", {rows, cols}, codes),
             encoder_kit::f32_tensor("d.weight_scale", {rows + 1}, random_values(7)),
             e4m3_tensor("e.weight", {2}, {0x38, 0x7f}),  // 1.0 and NaN
             encoder_kit::f32_tensor("e.weight_scale", {1}, {2.0f})});
  const encoder_kit::WeightSource src(file.string(), 0);
  const auto init = encoder_kit::RandomInit::normal(1);
  const std::vector<float> a = src.load("a.weight", {rows, cols}, init);
  const std::vector<float> b = src.load("b.weight", {rows, cols}, init);
  const float bf16_scale = encoder_kit::bf16_to_f32(encoder_kit::f32_to_bf16(tensor_scale));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const double code = encoder_kit::e4m3_to_f32(codes[i]);
      CHECK(a[i] == static_cast<float>(code * row_scales[static_cast<size_t>(r)]));
      CHECK(b[i] == static_cast<float>(code * bf16_scale));
    }
  // A row whose largest code is 448 (row 0: codes[0]) comes back as the
  // same codes and scale when the FP8 path quantises it per output channel.
  std::vector<float> row(a.begin(), a.begin() + cols);
  const encoder_kit::E4m3Rows again = encoder_kit::quantize_rows_e4m3(row.data(), 1, cols);
  CHECK(again.scales[0] == doctest::Approx(row_scales[0]).epsilon(1e-6));
  for (int64_t c = 0; c < cols; ++c)
    CHECK(again.codes[static_cast<size_t>(c)] == codes[static_cast<size_t>(c)]);

  kit_test::Failure f = failure_of([&] { src.load("c.weight", {rows, cols}, init); });
  CHECK(f.thrown);
  CHECK(contains(f.message, "'c.weight'"));
  CHECK(contains(f.message, "is F8_E4M3 but the checkpoint holds no 'c.weight_scale'"));
  f = failure_of([&] { src.load("d.weight", {rows, cols}, init); });
  CHECK(f.thrown);
  CHECK(contains(f.message, "'d.weight_scale'"));
  CHECK(contains(f.message, "one value (per tensor) or one per row ([6] or [6, 1])"));
  f = failure_of([&] { src.load("e.weight", {2}, init); });
  CHECK(f.thrown);
  CHECK(contains(f.message, "holds NaN at element 1 of 2"));
  const encoder_kit::WeightSource unchecked(file.string(), 0, /*check_finite=*/false);
  const std::vector<float> e = unchecked.load("e.weight", {2}, init);
  CHECK(e[0] == 2.0f);
  CHECK(std::isnan(e[1]));
  // A wrong shape is named as for any dtype.
  f = failure_of([&] { src.load("a.weight", {cols, rows}, init); });
  CHECK(contains(f.message, "has shape [6, 40], expected [40, 6]"));
}
