// The gRPC form of the serve protocol (serve/grpc_infer.hpp): ModelInferRequest
// messages with raw_input_contents or typed contents parsed into the images
// HTTP parses; malformed ones refused with 400 naming the input; responses
// carrying each output's bytes in raw_output_contents; HTTP statuses mapped to
// the gRPC codes the protocol's clients expect.
#include "serve/grpc_infer.hpp"

#include <encgraph/plugin_api.h>

#include <doctest/doctest.h>

#include <cstring>

using namespace encgraph::host::serve;

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

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A request of BYTES elements, in raw_input_contents (Triton's layout) or in bytes_contents.
inference::ModelInferRequest images(const std::vector<std::string>& files, bool raw) {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  auto* t = r.add_inputs();
  t->set_name("images");
  t->set_datatype("BYTES");
  t->add_shape(static_cast<int64_t>(files.size()));
  std::string blob;
  for (const std::string& f : files) {
    if (raw)
      blob += le32(static_cast<uint32_t>(f.size())) + f;
    else
      t->mutable_contents()->add_bytes_contents(f);
  }
  if (raw) r.add_raw_input_contents(blob);
  return r;
}

InferRequest parse(const inference::ModelInferRequest& r, RequestLimits limits = {}) {
  return parse_grpc_infer_request(r, kOutputs, limits);
}

std::pair<int, std::string> refusal(const inference::ModelInferRequest& r,
                                    RequestLimits limits = {}) {
  try {
    parse(r, limits);
  } catch (const ProtocolError& e) {
    return {e.status(), e.what()};
  }
  FAIL("no error for " << r.ShortDebugString());
  return {0, ""};
}

}  // namespace

TEST_CASE("gRPC: BYTES files, raw or in contents, and UINT8 pixels, in input order") {
  for (const bool raw : {true, false}) {
    CAPTURE(raw);
    inference::ModelInferRequest r = images({"hello", std::string("\0\1\2", 3)}, raw);
    r.set_id("r1");
    const InferRequest parsed = parse(r);
    CHECK(parsed.id == "r1");
    REQUIRE(parsed.images.size() == 2);
    CHECK(parsed.images[0].encoded);
    CHECK(parsed.images[0].label == "images[0]");
    CHECK(std::string(parsed.images[0].bytes.begin(), parsed.images[0].bytes.end()) == "hello");
    CHECK(parsed.images[1].bytes == std::vector<uint8_t>{0, 1, 2});
    // No outputs asked: every output and its rows.
    REQUIRE(parsed.outputs.size() == 4);
    CHECK(parsed.outputs[1].name == "embeddings_rows");
    CHECK(parsed.outputs[1].rows);
  }
  for (const bool raw : {true, false}) {
    CAPTURE(raw);
    inference::ModelInferRequest r;
    auto* t = r.add_inputs();
    t->set_name("pixels");
    t->set_datatype("UINT8");
    for (const int64_t d : {2, 1, 2, 3}) t->add_shape(d);
    const std::vector<uint8_t> values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 255};
    if (raw)
      r.add_raw_input_contents(std::string(values.begin(), values.end()));
    else
      for (const uint8_t v : values) t->mutable_contents()->add_uint_contents(v);
    const InferRequest parsed = parse(r);
    REQUIRE(parsed.images.size() == 2);
    CHECK_FALSE(parsed.images[1].encoded);
    CHECK(parsed.images[1].height == 1);
    CHECK(parsed.images[1].width == 2);
    CHECK(parsed.images[1].bytes == std::vector<uint8_t>{7, 8, 9, 10, 11, 255});
  }
}

TEST_CASE("gRPC: malformed requests are refused with 400 naming the input") {
  auto r = images({"abc"}, true);
  r.mutable_inputs(0)->set_datatype("FP32");
  CHECK(refusal(r).second.find("inputs[0] ('images') has datatype FP32") != std::string::npos);

  r = images({"abc"}, true);
  r.mutable_inputs(0)->set_shape(0, 2);
  CHECK(refusal(r).second.find("element 1") != std::string::npos);

  r = images({"abc"}, true);
  r.set_raw_input_contents(0, le32(10) + "abc");
  CHECK(refusal(r).second.find("truncated") != std::string::npos);

  r = images({"abc"}, false);
  r.mutable_inputs(0)->set_shape(0, 2);
  CHECK(refusal(r).second.find("1 contents.bytes_contents") != std::string::npos);

  r = images({"abc"}, true);
  r.add_raw_input_contents("");
  CHECK(refusal(r).second.find("2 raw_input_contents for 1 inputs") != std::string::npos);

  r = images({"a", "b", "c"}, true);
  RequestLimits few;
  few.max_items = 2;
  const auto [status, message] = refusal(r, few);
  CHECK(status == 400);
  CHECK(message.find("serve.max_items_per_request") != std::string::npos);

  inference::ModelInferRequest pixels;
  auto* t = pixels.add_inputs();
  t->set_name("pixels");
  t->set_datatype("UINT8");
  for (const int64_t d : {1, 1, 3}) t->add_shape(d);
  for (const uint32_t v : {1u, 2u, 256u}) t->mutable_contents()->add_uint_contents(v);
  CHECK(refusal(pixels).second.find("256; UINT8 values are 0..255") != std::string::npos);

  r = images({"abc"}, true);
  r.mutable_inputs(0)->set_name("text");
  CHECK(refusal(r).second.find("is named 'text'") != std::string::npos);

  r = images({"abc"}, true);
  r.add_outputs()->set_name("nope");
  CHECK(refusal(r).second.find("outputs[0] names 'nope'") != std::string::npos);

  r = images({"abc"}, true);
  auto* out = r.add_outputs();
  out->set_name("pooled_rows");
  (*out->mutable_parameters())["datatype"].set_string_param("BF16");
  CHECK(refusal(r).second.find("row counts are INT64") != std::string::npos);
}

TEST_CASE("gRPC: the response carries each selected output's bytes raw, BF16 rounded") {
  auto r = images({"abc", "de"}, true);
  r.add_outputs()->set_name("pooled_rows");
  auto* out = r.add_outputs();
  out->set_name("embeddings");
  (*out->mutable_parameters())["datatype"].set_string_param("BF16");
  const InferRequest parsed = parse(r);

  std::vector<ItemPtr> items;
  for (const std::vector<float>& values :
       {std::vector<float>{1.0f, -2.0f, 3.0f, 1.00390625f}, std::vector<float>{0.5f, 7.0f}}) {
    auto it = std::make_shared<ItemOutputs>();
    for (int o = 0; o < 2; ++o) {
      ItemOutput x;
      x.dtype = EG_DTYPE_F32;
      x.width = 2;
      x.rows = static_cast<int64_t>(values.size()) / 2;
      x.bytes.resize(values.size() * 4);
      std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
      it->outputs.push_back(std::move(x));
    }
    items.push_back(it);
  }
  inference::ModelInferResponse response;
  fill_grpc_infer_response("m", parsed, items, response);
  CHECK(response.model_name() == "m");
  CHECK(response.model_version() == "1");
  REQUIRE(response.outputs_size() == 2);
  REQUIRE(response.raw_output_contents_size() == 2);
  CHECK(response.outputs(0).name() == "pooled_rows");
  CHECK(response.outputs(0).datatype() == "INT64");
  CHECK(response.outputs(0).shape(0) == 2);
  int64_t rows[2];
  REQUIRE(response.raw_output_contents(0).size() == sizeof(rows));
  std::memcpy(rows, response.raw_output_contents(0).data(), sizeof(rows));
  CHECK(rows[0] == 2);
  CHECK(rows[1] == 1);
  CHECK(response.outputs(1).datatype() == "BF16");
  CHECK(response.outputs(1).shape(0) == 3);
  CHECK(response.outputs(1).shape(1) == 2);
  const std::string& bf16 = response.raw_output_contents(1);
  REQUIRE(bf16.size() == 6 * 2);
  uint16_t values[6];
  std::memcpy(values, bf16.data(), bf16.size());
  CHECK(values[0] == 0x3F80);  // 1.0
  CHECK(values[1] == 0xC000);  // -2.0
  CHECK(values[3] == 0x3F80);  // 1.00390625: a tie, rounded to even (1.0)
  CHECK(values[5] == 0x40E0);  // 7.0
}

TEST_CASE("gRPC: HTTP statuses map to the protocol's status codes") {
  CHECK(grpc_code(400) == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(grpc_code(404) == grpc::StatusCode::NOT_FOUND);
  CHECK(grpc_code(413) == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(grpc_code(429) == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(grpc_code(503) == grpc::StatusCode::UNAVAILABLE);
  CHECK(grpc_code(504) == grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK(grpc_code(500) == grpc::StatusCode::INTERNAL);
  CHECK(grpc_code(200) == grpc::StatusCode::OK);
  const grpc::Status status =
      grpc_error(std::make_exception_ptr(ProtocolError(429, "the queue is full")));
  CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(status.error_message() == "the queue is full");
}
