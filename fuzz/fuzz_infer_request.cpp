// The serve protocol (host/src/serve/infer_protocol.cpp): the input is an
// infer request body; the Inference-Header-Content-Length is the offset of
// its first 0xFF byte (which JSON text never holds), none without one. A
// request that parses is answered, JSON and binary, from one-row items.
#include "serve/infer_protocol.hpp"

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace {

using namespace encgraph::host::serve;

const std::vector<encgraph::OutputSpec>& outputs() {
  static const std::vector<encgraph::OutputSpec> o = [] {
    std::vector<encgraph::OutputSpec> specs(2);
    specs[0].name = "embeddings";
    specs[0].width = 3;
    specs[0].dtype = EG_DTYPE_F32;
    specs[1].name = "pooled";
    specs[1].width = 3;
    specs[1].dtype = EG_DTYPE_F32;
    return specs;
  }();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::optional<uint64_t> header;
  if (const void* mark = std::memchr(data, 0xFF, size))
    header = static_cast<uint64_t>(static_cast<const uint8_t*>(mark) - data);
  RequestLimits limits;
  limits.max_items = 8;
  limits.max_pixels = 4096;
  limits.max_frames = 16;
  try {
    InferRequest request = parse_infer_request(body, header, outputs(), limits);
    if (request.images.empty() || request.images.size() > 8) __builtin_trap();
    for (const ImageInput& image : request.images)
      if (!image.encoded && (image.height * image.width > 4096 || image.frames < 1 ||
                             image.frames > 16 || (!image.video && image.frames != 1) ||
                             image.bytes.size() != static_cast<size_t>(image.frames * image.height *
                                                                       image.width * 3)))
        __builtin_trap();
    auto item = std::make_shared<ItemOutputs>();
    for (int o = 0; o < 2; ++o) {
      ItemOutput out;
      out.dtype = EG_DTYPE_F32;
      out.rows = 1;
      out.width = 3;
      const float values[3] = {1.5f, -0.0f, 3e38f};
      out.bytes.resize(sizeof(values));
      std::memcpy(out.bytes.data(), values, sizeof(values));
      item->outputs.push_back(std::move(out));
    }
    const std::vector<ItemPtr> items(request.images.size(), item);
    encode_infer_response("m", request, items);
    for (OutputSelection& s : request.outputs) s.binary = !s.binary;
    const EncodedBody binary = encode_infer_response("m", request, items);
    if (binary.header_length && *binary.header_length > binary.body.size()) __builtin_trap();
  } catch (const ProtocolError&) {
  }
  return 0;
}
