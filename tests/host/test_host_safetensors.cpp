// The safetensors writer: header layout (length, dtype, shape, offsets,
// metadata, alignment), the bytes, and that failures leave no file behind.
#include "host_test_support.hpp"
#include "safetensors.hpp"
#include "safetensors_reader.hpp"

#include <encgraph/plugin_api.h>

#include <doctest/doctest.h>

using namespace encgraph::host;

TEST_CASE("tensors are written with dtype, shape and back-to-back offsets") {
  host_test::TempDir dir;
  const auto path = dir / "e.safetensors";
  {
    SafetensorsWriter w(path, {{"plugin", "toy"}});
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const uint16_t b[2] = {0x3f80, 0x4000};
    w.add("img/a.png", EG_DTYPE_F32, {3, 2}, a, sizeof(a));
    w.add("empty", EG_DTYPE_F32, {0, 2}, nullptr, 0);
    w.add("b", EG_DTYPE_BF16, {1, 2}, b, sizeof(b));
    CHECK_FALSE(std::filesystem::exists(path));  // only on finish
    w.finish();
  }
  const auto st = host_test::read_safetensors(path);
  CHECK(st.header["__metadata__"]["plugin"] == "toy");
  CHECK(st.header["img/a.png"]["dtype"] == "F32");
  CHECK(st.header["img/a.png"]["shape"] == nlohmann::json({3, 2}));
  CHECK(st.header["img/a.png"]["data_offsets"] == nlohmann::json({0, 24}));
  CHECK(st.header["empty"]["data_offsets"] == nlohmann::json({24, 24}));
  CHECK(st.header["b"]["dtype"] == "BF16");
  CHECK(st.header["b"]["data_offsets"] == nlohmann::json({24, 28}));
  CHECK(st.floats("img/a.png") == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(st.data.size() == 28);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    CHECK(e.path().filename() == "e.safetensors");  // no staging files left
}

TEST_CASE("wrong sizes and repeated names are refused") {
  host_test::TempDir dir;
  SafetensorsWriter w(dir / "e.safetensors", {});
  const float a[4] = {};
  CHECK_THROWS_WITH_AS(w.add("a", EG_DTYPE_F32, {3}, a, sizeof(a)),
                       doctest::Contains("its shape needs 12"), encgraph::Error);
  w.add("a", EG_DTYPE_F32, {4}, a, sizeof(a));
  CHECK_THROWS_WITH_AS(w.add("a", EG_DTYPE_F32, {4}, a, sizeof(a)), doctest::Contains("repeated"),
                       encgraph::Error);
  CHECK_THROWS_AS(w.add("__metadata__", EG_DTYPE_F32, {4}, a, sizeof(a)), encgraph::Error);
}

TEST_CASE("an unfinished writer leaves nothing behind") {
  host_test::TempDir dir;
  {
    SafetensorsWriter w(dir / "e.safetensors", {});
    const float a[1] = {1};
    w.add("a", EG_DTYPE_F32, {1}, a, sizeof(a));
  }
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("dtype names follow the safetensors spelling") {
  CHECK(std::string(safetensors_dtype(EG_DTYPE_F16)) == "F16");
  CHECK(std::string(safetensors_dtype(EG_DTYPE_F64)) == "F64");
  CHECK(std::string(safetensors_dtype(EG_DTYPE_I64)) == "I64");
  CHECK(std::string(safetensors_dtype(EG_DTYPE_U8)) == "U8");
  CHECK(dtype_bytes(EG_DTYPE_BF16) == 2);
  CHECK_THROWS_AS(safetensors_dtype(99), encgraph::Error);
}

TEST_CASE("an existing file is replaced only by a finished writer, in one step") {
  host_test::TempDir dir;
  const auto path = dir / "e.safetensors";
  std::ofstream(path) << "the old file";
  const float a[2] = {1, 2};
  {
    SafetensorsWriter w(path, {});
    w.add("a", EG_DTYPE_F32, {2}, a, sizeof(a));
    // The tensors' bytes are staged beside the target, under a name of its own.
    size_t staged = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      if (e.path().filename().string().rfind("e.safetensors.encgraph-", 0) == 0) ++staged;
    CHECK(staged == 1);
  }  // abandoned: the old file stays
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "the old file");
  {
    SafetensorsWriter w(path, {});
    w.add("a", EG_DTYPE_F32, {2}, a, sizeof(a));
    w.finish();
  }
  CHECK(host_test::read_safetensors(path).floats("a") == std::vector<float>{1, 2});
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) (void)e, ++files;
  CHECK(files == 1);
}

TEST_CASE("a name that is not UTF-8 is refused when added, not after the run") {
  host_test::TempDir dir;
  SafetensorsWriter w(dir / "e.safetensors", {});
  const float a[1] = {};
  CHECK_THROWS_WITH_AS(w.add("caf\xe9", EG_DTYPE_F32, {1}, a, sizeof(a)),
                       doctest::Contains("is not valid UTF-8"), encgraph::Error);
  w.add("ok", EG_DTYPE_F32, {1}, a, sizeof(a));
  w.finish();
  CHECK(host_test::read_safetensors(dir / "e.safetensors").header.contains("ok"));
}

TEST_CASE("the target is checked when the writer is made: a folder is refused untouched") {
  host_test::TempDir dir;
  std::filesystem::create_directories(dir / "e.safetensors");
  CHECK_THROWS_WITH_AS(SafetensorsWriter(dir / "e.safetensors", {}),
                       doctest::Contains("is a directory, not a regular file"), encgraph::Error);
  CHECK(std::filesystem::is_directory(dir / "e.safetensors"));
  CHECK(std::filesystem::is_empty(dir / "e.safetensors"));
}
