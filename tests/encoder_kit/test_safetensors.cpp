// The safetensors reader's checks: every way a header can lie about its file
// is an error naming the file and the tensor; sharded checkpoints likewise;
// only regular files are opened.
#include "kit_test_support.hpp"

#include <encoder_kit/input_file.hpp>
#include <encoder_kit/safetensors.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using kit_test::contains;
using kit_test::failure_of;
using kit_test::safetensors_bytes;

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  int64_t begin, int64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// "[a,b]" and "t7", appended: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(..).
std::string dims(std::initializer_list<int64_t> values) {
  std::string s = "[";
  for (int64_t v : values) {
    if (s.size() > 1) s += ',';
    s += std::to_string(v);
  }
  s += ']';
  return s;
}
std::string object(std::initializer_list<std::string> entries) {
  std::string s = "{";
  for (const std::string& e : entries) {
    if (s.size() > 1) s += ',';
    s += e;
  }
  s += '}';
  return s;
}
std::string tensor_name(int64_t i) {
  std::string s = "t";
  s += std::to_string(i);
  return s;
}

// The error parsing these bytes gives (the check fails when none).
kit_test::Failure parse_failure(const std::string& bytes) {
  const kit_test::Failure f = failure_of([&] {
    encoder_kit::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(),
                                   "w.safetensors");
  });
  CHECK(f.thrown);
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "plugin.weights file 'w.safetensors'"));
  return f;
}

std::string error_of(const std::string& header, const std::string& data) {
  return parse_failure(safetensors_bytes(header, data)).message;
}

std::vector<encoder_kit::TensorRef> parse_ok(const std::string& header, const std::string& data) {
  const std::string bytes = safetensors_bytes(header, data);
  return encoder_kit::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()),
                                        bytes.size(), "w.safetensors");
}

const std::string k8(8, '\x01');

}  // namespace

TEST_CASE("a well-formed header parses, in any key order, with metadata and zero-size tensors") {
  const auto t =
      parse_ok("{\"__metadata__\":{\"format\":\"pt\"}," + entry("b", "F32", "[1]", 4, 8) + "," +
                   entry("a", "BF16", "[2]", 0, 4) + "," + entry("e", "F32", "[0, 3]", 8, 8) + "}",
               k8);
  REQUIRE(t.size() == 3);
  CHECK(t[0].name == "b");
  CHECK(t[0].bytes == 4);
  CHECK(t[1].shape == std::vector<int64_t>{2});
  CHECK(t[2].bytes == 0);
  // Header padding with spaces, as writers align the data section.
  CHECK(parse_ok("{" + entry("a", "F32", "[2]", 0, 8) + "}   ", k8).size() == 1);
  // Dtypes the format defines but weights do not use are still understood.
  CHECK(parse_ok("{" + entry("m", "BOOL", "[8]", 0, 8) + "}", k8)[0].dtype ==
        encoder_kit::StDtype::Other);
}

TEST_CASE("overlapping, out-of-order and gapped data_offsets are refused") {
  std::string msg = error_of(
      "{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[1]", 4, 8) + "}", k8);
  CHECK(contains(msg, "overlaps"));
  CHECK(contains(msg, "'a'"));
  CHECK(contains(msg, "'b'"));
  msg = error_of("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 0, 4) + "}",
                 k8);
  CHECK(contains(msg, "overlaps"));
  msg = error_of("{" + entry("a", "F32", "[1]", 8, 4) + "}", k8);
  CHECK(contains(msg, "not an ascending pair"));
  msg = error_of("{" + entry("a", "F32", "[1]", 4, 8) + "}", k8);
  CHECK(contains(msg, "hole before tensor 'a'"));
  msg = error_of("{" + entry("a", "F32", "[1]", 0, 4) + "}", k8);
  CHECK(contains(msg, "4 bytes after the last tensor"));
  msg = error_of("{" + entry("a", "F32", "[1]", -4, 4) + "}", k8);
  CHECK(contains(msg, "not an ascending pair"));
}

TEST_CASE("random tilings: a shuffled exact tiling passes, any shifted span fails") {
  for (int round = 0; round < 50; ++round) {
    const int64_t n = kit_test::uniform(1, 12);
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      sizes.push_back(kit_test::uniform(0, 5) * 4);
      total += sizes.back();
    }
    std::vector<std::string> entries;
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      entries.push_back(
          entry(tensor_name(i), "F32", dims({sizes[i] / 4}), offset, offset + sizes[i]));
      offset += sizes[i];
    }
    std::shuffle(entries.begin(), entries.end(), kit_test::rng());
    std::string header = "{";
    for (size_t i = 0; i < entries.size(); ++i) header += (i ? "," : "") + entries[i];
    header += "}";
    const std::string data(static_cast<size_t>(total), '\0');
    CHECK(parse_ok(header, data).size() == static_cast<size_t>(n));
    // Shift one non-empty tensor by 4 bytes: an overlap, a hole or a span past the end.
    const int64_t k = kit_test::uniform(0, n - 1);
    if (sizes[k] == 0) continue;
    int64_t begin = 0;
    for (int64_t i = 0; i < k; ++i) begin += sizes[i];
    const int64_t shift = kit_test::uniform(0, 1) ? 4 : -4;
    if (begin + shift < 0) continue;
    std::string shifted = "{";
    for (int64_t i = 0, off = 0; i < n; off += sizes[i], ++i) {
      const int64_t b = i == k ? off + shift : off;
      if (i) shifted += ',';
      shifted += entry(tensor_name(i), "F32", dims({sizes[i] / 4}), b, b + sizes[i]);
    }
    shifted += "}";
    CAPTURE(shifted);
    parse_failure(safetensors_bytes(shifted, data));
  }
}

TEST_CASE("header lengths beyond the file or over the cap, and non-object headers") {
  std::string msg = parse_failure(safetensors_bytes("{}", "", uint64_t{1} << 63)).message;
  CHECK(contains(msg, "header length 9223372036854775808 is over the format's cap"));
  msg = parse_failure(safetensors_bytes("{}", "", 1000)).message;
  CHECK(contains(msg, "runs past the file's"));
  CHECK(contains(parse_failure("abc").message, "too short"));
  for (const char* header : {"[1, 2]", "\"x\"", "12", "null", "", "   "})
    CHECK(contains(error_of(header, ""), "not a JSON object"));
  CHECK(contains(error_of("{\"a\": 1", ""), "invalid JSON"));
  CHECK(contains(error_of("{\"a\": 1}", ""), "tensor 'a': its header entry is not an object"));
}

TEST_CASE("dtype, shape and span errors name the tensor") {
  std::string msg = error_of("{" + entry("w.q", "F12", "[2]", 0, 8) + "}", k8);
  CHECK(contains(msg, "tensor 'w.q': unknown dtype 'F12'"));
  msg = error_of("{" + entry("w.q", "F32", "[3]", 0, 8) + "}", k8);
  CHECK(contains(msg, "data_offsets span 8 bytes, but shape [3] of F32 needs 12"));
  msg = error_of("{" + entry("w.q", "F32", "[-2]", 0, 8) + "}", k8);
  CHECK(contains(msg, "negative extent -2"));
  msg = error_of("{" + entry("w.q", "F32", "[1e300]", 0, 8) + "}", k8);
  CHECK(contains(msg, "tensor 'w.q' shape entry must be an integer"));
  CHECK(contains(msg, "1e300"));
  msg = error_of("{" + entry("w.q", "F32", "[2.5]", 0, 8) + "}", k8);
  CHECK(contains(msg, "must be an integer"));
  msg = error_of("{" + entry("w.q", "F32", "[4294967296, 4294967296]", 0, 8) + "}", k8);
  CHECK(contains(msg, "more elements than 64 bits count"));
  msg = error_of("{" + entry("w.q", "F32", "[4611686018427387904]", 0, 8) + "}", k8);
  CHECK(contains(msg, "needs more bytes than 64 bits count"));
  msg = error_of("{" + entry("w.q", "F32", "[2]", 0, 16) + "}", k8);
  CHECK(contains(msg, "tensor 'w.q' needs bytes [0, 16)"));
  CHECK(contains(msg, "truncated"));
  msg = error_of("{\"w.q\":{\"dtype\":\"F32\",\"shape\":[2]}}", k8);
  CHECK(contains(msg, "lacks dtype, shape or data_offsets"));
  msg = error_of("{\"w.q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", k8);
  CHECK(contains(msg, "two entries"));
  msg = error_of("{\"w.q\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", k8);
  CHECK(contains(msg, "dtype must be a string"));
}

TEST_CASE("random shape products: overflow is refused, fitting products are checked exactly") {
  for (int i = 0; i < 200; ++i) {
    const int64_t a = kit_test::uniform(1, int64_t{1} << 40),
                  b = kit_test::uniform(1, int64_t{1} << 40);
    CAPTURE(a);
    CAPTURE(b);
    const std::string msg = error_of(object({entry("x", "F32", dims({a, b}), 0, 8)}), k8);
    __int128 need = static_cast<__int128>(a) * b * 4;
    if (need > static_cast<__int128>(UINT64_MAX))
      CHECK(contains(msg, "64 bits count"));
    else
      CHECK(contains(msg, "needs"));
  }
}

TEST_CASE("duplicate tensor names and a malformed __metadata__ are refused") {
  std::string msg = error_of(
      "{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("a", "F32", "[1]", 4, 8) + "}", k8);
  CHECK(contains(msg, "key \"a\" twice"));
  msg = error_of("{\"__metadata__\": [1]," + entry("a", "F32", "[2]", 0, 8) + "}", k8);
  CHECK(contains(msg, "__metadata__ must be an object"));
  msg = error_of("{\"__metadata__\": {\"n\": 3}," + entry("a", "F32", "[2]", 0, 8) + "}", k8);
  CHECK(contains(msg, "__metadata__ entry 'n' is not a string"));
}

TEST_CASE("only regular files are opened as weights; a directory must hold one checkpoint") {
  kit_test::TempDir dir("kit-st");
  const auto fifo = dir.path() / "w.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  kit_test::Failure f = failure_of([&] { encoder_kit::TensorStore::open(fifo); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "plugin.weights '" + fifo.string() + "' is a FIFO"));
  f = failure_of([&] { encoder_kit::TensorStore::open("/dev/zero"); });
  CHECK(contains(f.message, "is a character device"));
  f = failure_of([&] { encoder_kit::TensorStore::open(dir.path() / "none.safetensors"); });
  CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
  CHECK(contains(f.message, "does not exist"));
  // The directory holds a FIFO named like a checkpoint: refused, not opened.
  f = failure_of([&] { encoder_kit::TensorStore::open(dir.path()); });
  CHECK(contains(f.message, "is a FIFO"));
  std::filesystem::remove(fifo);
  f = failure_of([&] { encoder_kit::TensorStore::open(dir.path()); });
  CHECK(contains(f.message, "is a directory with no model.safetensors.index.json"));
  // A directory named model.safetensors is no checkpoint file.
  std::filesystem::create_directory(dir.path() / "model.safetensors");
  f = failure_of([&] { encoder_kit::TensorStore::open(dir.path()); });
  CHECK(contains(f.message, "is a directory"));
}

TEST_CASE("sharded checkpoints: the index is checked, shards stay beside it") {
  kit_test::TempDir dir("kit-st");
  const auto index = dir.path() / "model.safetensors.index.json";
  auto store_error = [&](const std::string& text) {
    kit_test::write_file(index, text);
    const kit_test::Failure f = failure_of([&] { encoder_kit::TensorStore::open(dir.path()); });
    CHECK(f.thrown);
    CHECK(f.status == EG_ERR_INVALID_ARGUMENT);
    CHECK(contains(f.message, index.string()));
    return f.message;
  };
  CHECK(contains(store_error("[1]"), "is not a JSON object"));
  CHECK(contains(store_error("{\"metadata\": {}}"), "no \"weight_map\""));
  CHECK(contains(store_error("{\"weight_map\": {\"a\": 3}}"),
                 "weight_map entry 'a' must be a string"));
  CHECK(contains(store_error("{\"weight_map\": {\"a\": \"../x.safetensors\"}}"),
                 "leaves the checkpoint"));
  CHECK(contains(store_error("{\"weight_map\": {\"a\": \"/dev/zero\"}}"), "absolute path"));
  CHECK(contains(store_error("{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}"), "twice"));
  CHECK(contains(store_error("{\"weight_map\": {\"a\": \"1e300\"}, }"), "invalid JSON"));
  // A shard that is not a regular file fails when its tensor is read, naming both.
  REQUIRE(::mkfifo((dir.path() / "s.safetensors").c_str(), 0600) == 0);
  kit_test::write_file(index, "{\"weight_map\": {\"a\": \"s.safetensors\"}}");
  auto store = encoder_kit::TensorStore::open(index);
  const kit_test::Failure f = failure_of([&] { store->get("a"); });
  CHECK(contains(f.message, "s.safetensors' is a FIFO"));
  // An index over the JSON cap is refused before it is read.
  std::filesystem::resize_file(index, encoder_kit::kMaxJsonInputBytes + 1);
  CHECK(contains(failure_of([&] { encoder_kit::TensorStore::open(index); }).message,
                 "over the limit"));
}

TEST_CASE("a missing tensor's message names the file's tensors that end like it") {
  const std::vector<std::string> names = {"model.vision_tower.embeddings.patch_embedding.weight",
                                          "model.vision_tower.embeddings.patch_embedding.bias",
                                          "model.multi_modal_projector.linear_1.weight",
                                          "model.image_newline"};
  const std::string hint = encoder_kit::similar_tensor_names(
      "model.vision_tower.vision_model.embeddings.patch_embedding.weight", names);
  CHECK(hint.find("'model.vision_tower.embeddings.patch_embedding.weight'") != std::string::npos);
  CHECK(hint.find("patch_embedding.bias") == std::string::npos);  // shares only one component
  CHECK(hint.find("weight_prefix") != std::string::npos);
  // Two components in common is enough; a shared last name alone is not.
  CHECK(encoder_kit::similar_tensor_names("a.linear_1.weight", names).find("linear_1.weight") !=
        std::string::npos);
  CHECK(encoder_kit::similar_tensor_names("x.y.weight", names).empty());
  CHECK(encoder_kit::similar_tensor_names("image_newline", names).empty());
}
