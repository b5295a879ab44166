// The kit's safetensors reader: values of each dtype, single files and sharded
// checkpoints, and errors that name the file and the tensor.
#include "qwen_test_support.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/safetensors.hpp>
#include <encoder_kit/weights.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <functional>

namespace {

using qwen_test::TempDir;

std::string error_of(const std::function<void()>& fn, eg_status* status = nullptr) {
  try {
    fn();
  } catch (const encoder_kit::Error& e) {
    if (status) *status = e.status();
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<encoder_kit::TensorToWrite> sample_tensors() {
  std::vector<encoder_kit::TensorToWrite> t;
  t.push_back(encoder_kit::f32_tensor("a.weight", {2, 3}, {1, 2, 3, 4, 5, 6}));
  t.push_back(encoder_kit::bf16_tensor("b.bias", {4}, {0.5f, -1.25f, 3.0f, 1e-3f}));
  encoder_kit::TensorToWrite h{"c.half", encoder_kit::StDtype::F16, {2}, std::vector<std::byte>(4)};
  const uint16_t v[2] = {encoder_kit::f32_to_f16(1.5f), encoder_kit::f32_to_f16(-0.0999755859375f)};
  std::memcpy(h.bytes.data(), v, 4);
  t.push_back(h);
  return t;
}

}  // namespace

TEST_CASE("reads F32, BF16 and F16 tensors as f32") {
  TempDir dir("st");
  const auto file = dir.path() / "m.safetensors";
  encoder_kit::write_safetensors(file, sample_tensors());
  auto store = encoder_kit::TensorStore::open(file);
  CHECK(store->contains("a.weight"));
  CHECK_FALSE(store->contains("nope"));
  CHECK(encoder_kit::read_as_f32(store->get("a.weight"), {2, 3}) ==
        std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto b = encoder_kit::read_as_f32(store->get("b.bias"), {4});
  CHECK(b[0] == 0.5f);
  CHECK(b[1] == -1.25f);
  CHECK(b[3] == doctest::Approx(1e-3).epsilon(4e-3));  // bf16 rounding
  const auto c = encoder_kit::read_as_f32(store->get("c.half"), {2});
  CHECK(c[0] == 1.5f);
  CHECK(c[1] == doctest::Approx(-0.0999755859375));
}

TEST_CASE("a missing tensor is named with the file") {
  TempDir dir("st");
  const auto file = dir.path() / "m.safetensors";
  encoder_kit::write_safetensors(file, sample_tensors());
  auto store = encoder_kit::TensorStore::open(file);
  eg_status st = EG_OK;
  const std::string msg = error_of([&] { store->get("visual.blocks.3.norm1.weight"); }, &st);
  CHECK(st == EG_ERR_INVALID_ARGUMENT);  // the user's checkpoint: the CLI's exit 2
  CHECK(contains(msg, "visual.blocks.3.norm1.weight"));
  CHECK(contains(msg, file.string()));
}

TEST_CASE("a mis-shaped tensor is named with the file and both shapes") {
  TempDir dir("st");
  const auto file = dir.path() / "m.safetensors";
  encoder_kit::write_safetensors(file, sample_tensors());
  encoder_kit::WeightSource src(file.string(), 0);
  const std::string msg = error_of([&] {
    src.load("a.weight", {3, 2}, encoder_kit::RandomInit::normal(1));
  });
  CHECK(contains(msg, "a.weight"));
  CHECK(contains(msg, file.string()));
  CHECK(contains(msg, "[2, 3]"));
  CHECK(contains(msg, "[3, 2]"));
}

TEST_CASE("a truncated file fails naming the file and the tensor that does not fit") {
  TempDir dir("st");
  const auto file = dir.path() / "m.safetensors";
  encoder_kit::write_safetensors(file, sample_tensors());
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 3);
  eg_status st = EG_OK;
  const std::string msg = error_of([&] { encoder_kit::TensorStore::open(file); }, &st);
  CHECK(st == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(msg, file.string()));
  CHECK(contains(msg, "c.half"));  // the last tensor lost its bytes
  CHECK(contains(msg, "truncated"));

  std::filesystem::resize_file(file, 5);
  CHECK(contains(error_of([&] { encoder_kit::TensorStore::open(file); }), "too short"));
}

TEST_CASE("a corrupt header and a missing file are errors naming the file") {
  TempDir dir("st");
  const auto file = dir.path() / "bad.safetensors";
  {
    std::ofstream out(file, std::ios::binary);
    const uint64_t len = 9;
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << "{\"x\": [1,";
  }
  const std::string msg = error_of([&] { encoder_kit::TensorStore::open(file); });
  CHECK(contains(msg, file.string()));
  CHECK(contains(msg, "JSON"));
  eg_status st = EG_OK;
  const std::string missing =
      error_of([&] { encoder_kit::TensorStore::open(dir.path() / "none.safetensors"); }, &st);
  CHECK(st == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(missing, "does not exist"));
  CHECK(contains(missing, "none.safetensors"));
}

TEST_CASE("sharded checkpoints resolve tensors through the index") {
  TempDir dir("st");
  auto t = sample_tensors();
  encoder_kit::write_safetensors(dir.path() / "model-00001-of-00002.safetensors", {t[0]});
  encoder_kit::write_safetensors(dir.path() / "model-00002-of-00002.safetensors", {t[1], t[2]});
  {
    std::ofstream idx(dir.path() / "model.safetensors.index.json");
    idx << R"({"metadata": {"total_size": 42}, "weight_map": {
      "a.weight": "model-00001-of-00002.safetensors",
      "b.bias": "model-00002-of-00002.safetensors",
      "c.half": "model-00002-of-00002.safetensors",
      "ghost": "model-00002-of-00002.safetensors",
      "lost": "model-00003-of-00002.safetensors"}})";
  }
  auto store = encoder_kit::TensorStore::open(dir.path());  // the directory finds the index
  CHECK(encoder_kit::read_as_f32(store->get("a.weight"), {2, 3})[5] == 6.0f);
  CHECK(encoder_kit::read_as_f32(store->get("b.bias"), {4})[2] == 3.0f);
  CHECK(store->contains("c.half"));
  const std::string ghost = error_of([&] { store->get("ghost"); });
  CHECK(contains(ghost, "ghost"));
  CHECK(contains(ghost, "model-00002-of-00002.safetensors"));
  const std::string lost = error_of([&] { store->get("lost"); });
  CHECK(contains(lost, "model-00003-of-00002.safetensors"));
  CHECK(contains(error_of([&] { store->get("absent"); }), "absent"));
}

TEST_CASE("random weights depend only on seed, name and index") {
  encoder_kit::WeightSource a("random", 7), b("random", 7), c("random", 8);
  const auto x = a.load("w", {4, 5}, encoder_kit::RandomInit::normal(0.5));
  CHECK(x == b.load("w", {4, 5}, encoder_kit::RandomInit::normal(0.5)));
  CHECK(x != c.load("w", {4, 5}, encoder_kit::RandomInit::normal(0.5)));
  CHECK(x != a.load("v", {4, 5}, encoder_kit::RandomInit::normal(0.5)));
  CHECK(a.load("n", {3}, encoder_kit::RandomInit::constant(1.0)) == std::vector<float>{1, 1, 1});
}

TEST_CASE("bf16 and f16 conversions round to nearest even") {
  CHECK(encoder_kit::f32_to_bf16(1.0f) == 0x3f80);
  CHECK(encoder_kit::bf16_to_f32(encoder_kit::f32_to_bf16(3.14159f)) ==
        doctest::Approx(3.14159).epsilon(4e-3));
  CHECK(encoder_kit::f32_to_bf16(1.00390625f) == 0x3f80);  // halfway: to even
  CHECK(encoder_kit::f32_to_bf16(1.01171875f) == 0x3f82);  // halfway: to even (up)
  CHECK(std::isnan(encoder_kit::bf16_to_f32(encoder_kit::f32_to_bf16(NAN))));
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    CHECK(encoder_kit::f16_to_f32(encoder_kit::f32_to_f16(v)) == v);
  CHECK(std::isinf(encoder_kit::f16_to_f32(encoder_kit::f32_to_f16(1e6f))));
}
