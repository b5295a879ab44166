// The serve protocol layer: infer requests in JSON and with Triton's binary
// tensors parsed into images; every malformed request refused with a 4xx
// naming the input at fault; responses that carry the stored bytes bit for
// bit (binary) or numbers that read back to the same floats (JSON).
#include "serve/infer_protocol.hpp"

#include <encgraph/plugin_api.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>

using namespace encgraph::host::serve;
using nlohmann::json;

namespace {

const std::vector<encgraph::OutputSpec> kOutputs = [] {
  std::vector<encgraph::OutputSpec> o(2);
  o[0].name = "embeddings";
  o[0].width = 2;
  o[0].dtype = EG_DTYPE_F32;
  o[1].name = "pooled";
  o[1].width = 2;
  o[1].dtype = EG_DTYPE_F32;
  return o;
}();

InferRequest parse(const std::string& body, std::optional<uint64_t> header = std::nullopt,
                   RequestLimits limits = {}) {
  return parse_infer_request(body, header, kOutputs, limits);
}

// The status and message of the ProtocolError parsing `body` throws.
std::pair<int, std::string> refusal(const std::string& body,
                                    std::optional<uint64_t> header = std::nullopt,
                                    RequestLimits limits = {}) {
  try {
    parse(body, header, limits);
  } catch (const ProtocolError& e) {
    return {e.status(), e.what()};
  }
  FAIL("no error for " << body);
  return {0, ""};
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

ItemPtr item(std::vector<float> first, std::vector<float> second) {
  auto it = std::make_shared<ItemOutputs>();
  for (const auto* values : {&first, &second}) {
    ItemOutput o;
    o.dtype = EG_DTYPE_F32;
    o.width = 2;
    o.rows = static_cast<int64_t>(values->size()) / 2;
    o.bytes.resize(values->size() * 4);
    std::memcpy(o.bytes.data(), values->data(), o.bytes.size());
    it->outputs.push_back(std::move(o));
  }
  return it;
}

}  // namespace

TEST_CASE("JSON: base64 images and nested UINT8 pixels, in input order") {
  const InferRequest r = parse(
      R"({"id": "r1", "inputs": [
           {"name": "images", "datatype": "BYTES", "shape": [2], "data": ["aGVsbG8=", "AAEC"]},
           {"name": "pixels", "datatype": "UINT8", "shape": [1, 2, 3],
            "data": [[[1, 2, 3], [4, 5, 255]]]}]})");
  CHECK(r.id == "r1");
  REQUIRE(r.images.size() == 3);
  CHECK(r.images[0].encoded);
  CHECK(std::string(r.images[0].bytes.begin(), r.images[0].bytes.end()) == "hello");
  CHECK(r.images[1].bytes == std::vector<uint8_t>{0, 1, 2});
  CHECK(r.images[1].label == "images[1]");
  CHECK_FALSE(r.images[2].encoded);
  CHECK(r.images[2].height == 1);
  CHECK(r.images[2].width == 2);
  CHECK(r.images[2].bytes == std::vector<uint8_t>{1, 2, 3, 4, 5, 255});
  // No outputs asked: every output and its row counts, as JSON.
  REQUIRE(r.outputs.size() == 4);
  CHECK(r.outputs[1].name == "embeddings_rows");
  CHECK_FALSE(r.outputs[0].binary);
}

TEST_CASE("binary tensors: BYTES elements and raw pixels after the JSON header") {
  const std::string header =
      R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [2],
                      "parameters": {"binary_data_size": 13}},
                     {"name": "pixels", "datatype": "UINT8", "shape": [2, 1, 1, 3],
                      "parameters": {"binary_data_size": 6}}],
          "outputs": [{"name": "pooled", "parameters": {"binary_data": true, "datatype": "BF16"}}]})";
  const std::string body = header + le32(3) + "abc" + le32(2) + "de" + "\x01\x02\x03\x04\x05\x06";
  const InferRequest r = parse(body, header.size());
  REQUIRE(r.images.size() == 4);
  CHECK(std::string(r.images[0].bytes.begin(), r.images[0].bytes.end()) == "abc");
  CHECK(std::string(r.images[1].bytes.begin(), r.images[1].bytes.end()) == "de");
  CHECK(r.images[3].bytes == std::vector<uint8_t>{4, 5, 6});
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].binary);
  CHECK(r.outputs[0].dtype == EG_DTYPE_BF16);
  CHECK(r.outputs[0].index == 1);
}

TEST_CASE("malformed requests are refused with 400 naming the fault") {
  const struct {
    std::string body;
    std::string says;
  } cases[] = {
      {"{\"inputs\": [", "malformed"},
      {"{\"id\": 1e999999, \"inputs\": []}", "malformed"},  // past double's range
      {"[1, 2]", "JSON object"},
      {"{}", "'inputs'"},
      {R"({"inputs": [{"name": "images", "datatype": "FP32", "shape": [1], "data": ["AA=="]}]})",
       "datatype FP32"},
      {R"({"inputs": [{"name": "pixels", "datatype": "BYTES", "shape": [1, 1, 3], "data": [1, 2, 3]}]})",
       "raw pixels are UINT8"},
      {R"({"inputs": [{"name": "pixels", "datatype": "UINT8", "shape": [2, 2], "data": [1, 2, 3, 4]}]})",
       "[height, width, 3]"},
      {R"({"inputs": [{"name": "pixels", "datatype": "UINT8", "shape": [1, 1, 3], "data": [1, 2]}]})",
       "holds 2 values"},
      {R"({"inputs": [{"name": "pixels", "datatype": "UINT8", "shape": [1, 1, 3], "data": [1, 2, 300]}]})",
       "0..255"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [2], "data": ["AA=="]}]})",
       "array of 2 base64"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["%%%%"]}]})",
       "not base64"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [-1], "data": []}]})",
       "non-negative"},
      {R"({"inputs": [{"name": "tokens", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}]})",
       "'images' (BYTES"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1]}]})", "neither 'data'"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}],
          "outputs": [{"name": "logits"}]})",
       "does not have (it has embeddings, embeddings_rows, pooled, pooled_rows)"},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}],
          "outputs": [{"name": "pooled", "parameters": {"datatype": "INT8"}}]})",
       "\"FP32\" or \"BF16\""},
      {R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
           "parameters": {"binary_data_size": 4}}]})",
       "no Inference-Header-Content-Length"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const auto [status, message] = refusal(c.body);
    CHECK(status == 400);
    CHECK(message.find(c.says) != std::string::npos);
  }
}

TEST_CASE("truncated or padded binary data is refused") {
  const std::string header =
      R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                      "parameters": {"binary_data_size": 9}}]})";
  const std::string full = header + le32(5) + "abcde";
  CHECK(parse(full, header.size()).images.size() == 1);
  auto [status, message] = refusal(full.substr(0, full.size() - 2), header.size());
  CHECK(status == 400);
  CHECK(message.find("truncated") != std::string::npos);
  std::tie(status, message) = refusal(full + "xx", header.size());
  CHECK(status == 400);
  CHECK(message.find("2 bytes follow") != std::string::npos);
  // An element's length prefix running past its tensor.
  const std::string lying = header + le32(50) + "abcde";
  std::tie(status, message) = refusal(lying, header.size());
  CHECK(message.find("declares 50 bytes") != std::string::npos);
  std::tie(status, message) = refusal(full, full.size() + 1);
  CHECK(message.find("Inference-Header-Content-Length is") != std::string::npos);
}

TEST_CASE("request limits: items and pixels per image") {
  RequestLimits limits;
  limits.max_items = 2;
  limits.max_pixels = 100;
  auto [status, message] = refusal(
      R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [3], "data": ["", "", ""]}]})",
      std::nullopt, limits);
  CHECK(status == 400);
  CHECK(message.find("serve.max_items_per_request") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "pixels", "datatype": "UINT8", "shape": [11, 10, 3], "data": []}]})",
      std::nullopt, limits);
  CHECK(message.find("serve.max_pixels") != std::string::npos);
}

TEST_CASE("video inputs: files and frames, each one video item with its frame count") {
  const std::string header =
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [2, 3, 1, 1, 3],
                      "parameters": {"binary_data_size": 18}},
                     {"name": "videos", "datatype": "BYTES", "shape": [1],
                      "parameters": {"binary_data_size": 7}}]})";
  std::string frames;
  for (int v = 0; v < 18; ++v) frames += static_cast<char>(v);
  const std::string body = header + frames + le32(3) + "mkv";
  const InferRequest r = parse(body, header.size());
  REQUIRE(r.images.size() == 3);
  for (size_t v = 0; v < 2; ++v) {
    CHECK(r.images[v].video);
    CHECK_FALSE(r.images[v].encoded);
    CHECK(r.images[v].frames == 3);
    CHECK(r.images[v].label == "frames[" + std::to_string(v) + "]");
    REQUIRE(r.images[v].bytes.size() == 9);
    CHECK(r.images[v].bytes[0] == 9 * v);  // video v's frames, in order
  }
  CHECK(r.images[2].video);
  CHECK(r.images[2].encoded);
  CHECK(r.images[2].label == "videos[0]");
  CHECK(std::string(r.images[2].bytes.begin(), r.images[2].bytes.end()) == "mkv");
  // JSON frames: [F, H, W, 3] is one video.
  const InferRequest j = parse(
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [2, 1, 1, 3],
                      "data": [[[[1, 2, 3]]], [[[4, 5, 6]]]]}]})");
  REQUIRE(j.images.size() == 1);
  CHECK(j.images[0].frames == 2);
  CHECK(j.images[0].bytes == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("video inputs: wrong shapes, datatypes and too many frames are refused") {
  RequestLimits limits;
  limits.max_frames = 4;
  auto [status, message] = refusal(
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [1, 1, 3], "data": [1, 2, 3]}]})");
  CHECK(status == 400);
  CHECK(message.find("[frames, height, width, 3]") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [5, 1, 1, 3], "data": []}]})",
      std::nullopt, limits);
  CHECK(status == 400);
  CHECK(message.find("limits.max_frames_per_video") != std::string::npos);
  // A shape promising 2e11 values with none sent: refused, nothing that size allocated.
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [4096, 4096, 4096, 3],
                      "data": [1]}]})");
  CHECK(status == 400);
  CHECK(message.find("holds 1 values") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "frames", "datatype": "UINT8", "shape": [0, 1, 1, 3], "data": []}]})");
  CHECK(message.find("at least 1 frame") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "videos", "datatype": "UINT8", "shape": [1], "data": [1]}]})");
  CHECK(message.find("video files are BYTES") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "frames", "datatype": "BYTES", "shape": [1], "data": [""]}]})");
  CHECK(message.find("use the BYTES input 'videos'") != std::string::npos);
  std::tie(status, message) = refusal(
      R"({"inputs": [{"name": "videos", "datatype": "BYTES", "shape": [1], "data": ["@@"]}]})");
  CHECK(message.find("videos[0]") != std::string::npos);
}

TEST_CASE("responses: JSON numbers read back to the same floats, binary is the stored bytes") {
  const std::vector<ItemPtr> items = {item({0.1f, -3.25e-7f, 1e30f, 2.0f}, {5.5f, 6.0f}),
                                      item({1.0f / 3.0f, -0.0f}, {7.0f, 8.0f})};
  InferRequest r = parse(
      R"({"id": "x", "inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}]})");
  const EncodedBody body = encode_infer_response("m", r, items);
  CHECK_FALSE(body.header_length);
  const json doc = json::parse(body.body.text());
  CHECK(doc["id"] == "x");
  CHECK(doc["model_name"] == "m");
  const json& emb = doc["outputs"][0];
  CHECK(emb["name"] == "embeddings");
  CHECK(emb["shape"] == json::array({3, 2}));
  const std::vector<float> want = {0.1f, -3.25e-7f, 1e30f, 2.0f, 1.0f / 3.0f, -0.0f};
  REQUIRE(emb["data"].size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float got = static_cast<float>(emb["data"][i].get<double>());
    CHECK(std::memcmp(&got, &want[i], 4) == 0);
  }
  CHECK(doc["outputs"][1]["data"] == json::array({2, 1}));  // embeddings_rows
  CHECK(doc["outputs"][3]["data"] == json::array({1, 1}));  // pooled_rows

  r.outputs = {r.outputs[2]};  // pooled, binary, BF16
  r.outputs[0].binary = true;
  r.outputs[0].dtype = EG_DTYPE_BF16;
  const EncodedBody bin = encode_infer_response("m", r, items);
  const std::string bin_text = bin.body.text();
  REQUIRE(bin.header_length);
  const json head = json::parse(bin_text.substr(0, *bin.header_length));
  CHECK(head["outputs"][0]["datatype"] == "BF16");
  CHECK(head["outputs"][0]["parameters"]["binary_data_size"] == 8);
  const std::string tail = bin_text.substr(*bin.header_length);
  REQUIRE(tail.size() == 8);
  uint16_t first;
  std::memcpy(&first, tail.data(), 2);
  CHECK(first == float_to_bf16(5.5f));
  CHECK(first == 0x40B0);  // 5.5 = 0x40B00000
}

TEST_CASE("binary answers: outputs stored in the datatype asked are sent as stored, uncopied") {
  const std::vector<ItemPtr> items = {item({0.5f, 1.5f, 2.5f, 3.5f}, {5.5f, 6.0f}),
                                      item({-1.0f, -2.0f}, {7.0f, 8.0f})};
  InferRequest r = parse(
      R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}],
          "parameters": {"binary_data_output": true}})");
  r.outputs[2].dtype = EG_DTYPE_BF16;  // pooled: converted for this answer
  const EncodedBody bin = encode_infer_response("m", r, items);
  // The header; each item's FP32 embeddings (its own bytes); then the rows,
  // the BF16 pooled values and their rows, made here, in one part.
  REQUIRE(bin.body.parts.size() == 4);
  for (size_t i = 0; i < 2; ++i) {
    const ItemOutput& stored = items[i]->outputs[0];
    CHECK(bin.body.parts[1 + i].data == stored.bytes.data());
    CHECK(bin.body.parts[1 + i].size == stored.bytes.size());
    CHECK(bin.body.parts[1 + i].owner == items[i]);  // kept alive until written
  }
  CHECK(bin.body.parts[3].size == 2 * 8 + 2 * 2 * 2 + 2 * 8);
  CHECK(bin.body.size() == *bin.header_length + 6 * 4 + bin.body.parts[3].size);
}

TEST_CASE("binary answers: every tensor at its offset, bf16 stored values widened exactly") {
  // Stored as the GPU path stores them: bf16. Asked for as FP32 (the default)
  // they widen bit for bit; asked for as BF16 they are the stored bytes.
  auto stored = std::make_shared<ItemOutputs>();
  const std::vector<uint16_t> halves = {0x3F80, 0xC0B0, 0x7F80, 0x0001, 0x8000, 0x4049};
  for (int o = 0; o < 2; ++o) {
    ItemOutput out;
    out.dtype = EG_DTYPE_BF16;
    out.width = 2;
    out.rows = o == 0 ? 3 : 1;
    out.bytes.resize(static_cast<size_t>(out.rows * out.width) * 2);
    std::memcpy(out.bytes.data(), halves.data(), out.bytes.size());
    stored->outputs.push_back(std::move(out));
  }
  const std::vector<ItemPtr> items = {stored, stored};
  InferRequest r = parse(
      R"({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ["AA=="]}],
          "parameters": {"binary_data_output": true}})");
  REQUIRE(r.outputs.size() == 4);  // embeddings, its rows, pooled, its rows
  r.outputs[2].dtype = EG_DTYPE_BF16;
  const EncodedBody bin = encode_infer_response("m", r, items);
  const std::string bin_text = bin.body.text();
  REQUIRE(bin.header_length);
  const json head = json::parse(bin_text.substr(0, *bin.header_length));
  const std::vector<size_t> sizes = {2 * 6 * 4, 2 * 8, 2 * 2 * 2, 2 * 8};
  size_t at = *bin.header_length;
  for (size_t k = 0; k < sizes.size(); ++k)
    CHECK(head["outputs"][k]["parameters"]["binary_data_size"] == sizes[k]);
  CHECK(bin.body.size() == at + sizes[0] + sizes[1] + sizes[2] + sizes[3]);
  for (int i = 0; i < 2; ++i)
    for (size_t v = 0; v < 6; ++v) {  // embeddings, FP32: the bf16 bits << 16
      uint32_t bits;
      std::memcpy(&bits, bin_text.data() + at + (i * 6 + v) * 4, 4);
      CHECK(bits == uint32_t{halves[v]} << 16);
    }
  at += sizes[0];
  int64_t rows[2];
  std::memcpy(rows, bin_text.data() + at, 16);
  CHECK(rows[0] == 3);
  CHECK(rows[1] == 3);
  at += sizes[1];
  CHECK(std::memcmp(bin_text.data() + at, halves.data(), 4) == 0);  // pooled, BF16: stored
  CHECK(std::memcmp(bin_text.data() + at + 4, halves.data(), 4) == 0);
  at += sizes[2];
  std::memcpy(rows, bin_text.data() + at, 16);
  CHECK(rows[0] == 1);
  CHECK(rows[1] == 1);
  // The same through encode_output (JSON data) and append_output (gRPC's raw
  // contents, appended after what the string already holds).
  const OutputTensor t = encode_output(r.outputs[0], items);
  CHECK(t.shape == std::vector<int64_t>{6, 2});
  REQUIRE(t.bytes.size() == sizes[0]);
  CHECK(std::memcmp(t.bytes.data(), bin_text.data() + *bin.header_length, sizes[0]) == 0);
  std::string raw = "xy";
  CHECK(append_output(r.outputs[0], items, raw) == std::vector<int64_t>{6, 2});
  REQUIRE(raw.size() == 2 + sizes[0]);
  CHECK(raw.compare(0, 2, "xy") == 0);
  CHECK(std::memcmp(raw.data() + 2, t.bytes.data(), sizes[0]) == 0);
}

TEST_CASE("binary answers: outputs of thousands of values convert exactly across chunks") {
  // Converted a chunk at a time: every value at its place, either way, for
  // sizes around and across the chunks (and the items' boundaries).
  for (const int64_t rows : {1, 7, 1025, 3001}) {
    CAPTURE(rows);
    auto wide = std::make_shared<ItemOutputs>(), narrow = std::make_shared<ItemOutputs>();
    ItemOutput f, h;
    f.dtype = EG_DTYPE_F32;
    h.dtype = EG_DTYPE_BF16;
    f.rows = h.rows = rows;
    f.width = h.width = 3;
    const size_t n = static_cast<size_t>(rows * 3);
    std::vector<float> values(n);
    std::vector<uint16_t> halves(n);
    for (size_t i = 0; i < n; ++i) {
      values[i] = static_cast<float>(i) * 0.37f - 500.0f;
      halves[i] = float_to_bf16(values[i]);
    }
    f.bytes.resize(n * 4);
    std::memcpy(f.bytes.data(), values.data(), n * 4);
    h.bytes.resize(n * 2);
    std::memcpy(h.bytes.data(), halves.data(), n * 2);
    wide->outputs.push_back(std::move(f));
    narrow->outputs.push_back(std::move(h));
    OutputSelection sel{"embeddings", 0, false, EG_DTYPE_BF16, true};
    std::string as_bf16;  // stored F32, asked BF16: rounded as float_to_bf16 rounds
    append_output(sel, {wide, wide}, as_bf16);
    REQUIRE(as_bf16.size() == 2 * n * 2);
    sel.dtype = EG_DTYPE_F32;
    std::string as_f32;  // stored BF16, asked FP32: widened bit for bit
    append_output(sel, {narrow, narrow}, as_f32);
    REQUIRE(as_f32.size() == 2 * n * 4);
    size_t wrong = 0;
    for (size_t k = 0; k < 2 * n; ++k) {
      uint16_t got16;
      uint32_t got32;
      std::memcpy(&got16, as_bf16.data() + 2 * k, 2);
      std::memcpy(&got32, as_f32.data() + 4 * k, 4);
      wrong += got16 != halves[k % n] || got32 != uint32_t{halves[k % n]} << 16;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("bfloat16 rounding is to nearest, ties to even") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  uint32_t bits = 0x3F808000;  // exactly between 0x3F80 and 0x3F81: to even
  float f;
  std::memcpy(&f, &bits, 4);
  CHECK(float_to_bf16(f) == 0x3F80);
  bits = 0x3F818000;  // between 0x3F81 and 0x3F82: to even (0x3F82)
  std::memcpy(&f, &bits, 4);
  CHECK(float_to_bf16(f) == 0x3F82);
  bits = 0x3F808001;  // just above the tie
  std::memcpy(&f, &bits, 4);
  CHECK(float_to_bf16(f) == 0x3F81);
}

TEST_CASE("base64 decoding and JSON strings") {
  CHECK(decode_base64("") == std::vector<uint8_t>{});
  CHECK(decode_base64("TWFu") == std::vector<uint8_t>{'M', 'a', 'n'});
  CHECK(decode_base64("TWE=") == std::vector<uint8_t>{'M', 'a'});
  CHECK(decode_base64("TQ==") == std::vector<uint8_t>{'M'});
  CHECK_FALSE(decode_base64("TQ="));
  CHECK_FALSE(decode_base64("T=Q="));
  CHECK_FALSE(decode_base64("TQ==TWFu"));
  CHECK(json_string("a\"b\n") == "\"a\\\"b\\n\"");
  CHECK(error_json("x") == "{\"error\":\"x\"}");
}
