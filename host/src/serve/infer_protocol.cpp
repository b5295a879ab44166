#include "serve/infer_protocol.hpp"

#include <encgraph/plugin_api.h>
#include <encgraph/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

namespace encgraph::host::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& message) {
  throw ProtocolError(400, message);
}

// A non-negative integer that fits int64, or a 400 naming `what`.
int64_t count_value(const json& v, const std::string& what) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{1} << 40)
    return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  bad(what + " must be a non-negative integer, got " + v.dump());
}

bool bool_parameter(const json& object, const char* key, const std::string& where) {
  const auto params = object.find("parameters");
  if (params == object.end()) return false;
  if (!params->is_object()) bad(where + ".parameters must be an object");
  const auto it = params->find(key);
  if (it == params->end()) return false;
  if (!it->is_boolean())
    bad(where + ".parameters." + key + " must be true or false, got " + it->dump());
  return it->get<bool>();
}

// The binary part of the body, handed out input by input in order.
class BinaryPart {
 public:
  explicit BinaryPart(std::string_view rest) : rest_(rest) {}
  std::string_view take(uint64_t size, const std::string& where) {
    if (size > rest_.size())
      bad(where + " declares binary_data_size " + std::to_string(size) + " but only " +
          std::to_string(rest_.size()) +
          " bytes of binary data remain in the body: the request is truncated, or the "
          "sizes do not add up to what follows the JSON header");
    std::string_view out = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return out;
  }
  size_t left() const { return rest_.size(); }

 private:
  std::string_view rest_;
};

void add_image(InferRequest& request, ImageInput image, const RequestLimits& limits) {
  if (static_cast<int64_t>(request.images.size()) >= limits.max_items)
    bad("the request holds more than " + std::to_string(limits.max_items) +
        " images (serve.max_items_per_request); split it into several requests");
  request.images.push_back(std::move(image));
}

// BYTES: each element one PNG or JPEG file, base64 in JSON, or in the binary
// part as Triton lays BYTES out (a 4-byte little-endian length, then the bytes).
void read_images(const json& input, const std::string& where, int64_t count,
                 std::optional<std::string_view> binary, InferRequest& request,
                 const RequestLimits& limits) {
  const std::string name = input["name"].get<std::string>();
  const bool video = name == kVideosInput;
  if (binary) {
    std::string_view rest = *binary;
    for (int64_t i = 0; i < count; ++i) {
      if (rest.size() < 4)
        bad(where + ": its binary data ends before element " + std::to_string(i) +
            "'s 4-byte length (BYTES elements are a little-endian uint32 length, then the "
            "bytes)");
      uint32_t size = 0;
      for (int b = 3; b >= 0; --b) size = (size << 8) | static_cast<uint8_t>(rest[b]);
      rest.remove_prefix(4);
      if (size > rest.size())
        bad(where + ": element " + std::to_string(i) + " declares " + std::to_string(size) +
            " bytes but " + std::to_string(rest.size()) + " remain: the data is truncated");
      ImageInput image;
      image.label = name + "[" + std::to_string(i) + "]";
      image.video = video;
      image.bytes.assign(rest.begin(), rest.begin() + size);
      rest.remove_prefix(size);
      add_image(request, std::move(image), limits);
    }
    if (!rest.empty())
      bad(where + ": " + std::to_string(rest.size()) + " bytes follow its " +
          std::to_string(count) + " elements; the shape and the data disagree");
    return;
  }
  const json& data = input["data"];
  if (!data.is_array() || static_cast<int64_t>(data.size()) != count)
    bad(where + ".data must be an array of " + std::to_string(count) + " base64 strings (one " +
        (video ? "video" : "PNG or JPEG") + " file each), as its shape says");
  for (int64_t i = 0; i < count; ++i) {
    const json& element = data[static_cast<size_t>(i)];
    const std::string label = name + "[" + std::to_string(i) + "]";
    if (!element.is_string()) bad(where + ": element " + label + " must be a base64 string");
    auto bytes = decode_base64(element.get_ref<const std::string&>());
    if (!bytes)
      bad(where + ": element " + label +
          " is not base64 (standard alphabet, padded); BYTES elements in JSON carry the "
          "file base64-encoded");
    ImageInput image;
    image.label = label;
    image.video = video;
    image.bytes = std::move(*bytes);
    add_image(request, std::move(image), limits);
  }
}

// UINT8 [H, W, 3] or [N, H, W, 3]: raw RGB pixels, row-major; for "frames"
// (videos) [F, H, W, 3] or [N, F, H, W, 3].
void read_pixels(const json& input, const std::string& where, const std::vector<int64_t>& shape,
                 std::optional<std::string_view> binary, InferRequest& request,
                 const RequestLimits& limits) {
  const std::string name = input["name"].get<std::string>();
  const bool video = name == kFramesInput;
  const size_t rank = video ? 4 : 3;  // one item's
  if ((shape.size() != rank && shape.size() != rank + 1) || shape.back() != 3)
    bad(where + " has shape " + json(shape).dump() +
        (video ? "; UINT8 frames are [frames, height, width, 3] or [videos, frames, height, "
                 "width, 3] (RGB)"
               : "; UINT8 pixels are [height, width, 3] or [images, height, width, 3] (RGB)"));
  const int64_t n = shape.size() == rank + 1 ? shape[0] : 1;
  const int64_t frames = video ? shape[shape.size() - 4] : 1;
  const int64_t h = shape[shape.size() - 3], w = shape[shape.size() - 2];
  if (h < 1 || w < 1) bad(where + ": height and width must be at least 1");
  if (frames < 1) bad(where + ": a video needs at least 1 frame");
  if (frames > limits.max_frames)
    bad(where + ": " + std::to_string(frames) + " frames are over the limit of " +
        std::to_string(limits.max_frames) +
        " frames per video (limits.max_frames_per_video); send fewer frames");
  if (h > limits.max_pixels / w)
    bad(where + ": " + std::to_string(w) + "x" + std::to_string(h) + " is over the limit of " +
        std::to_string(limits.max_pixels) +
        " pixels per image (serve.max_pixels); send a smaller image");
  const size_t per_image = static_cast<size_t>(frames * h * w * 3);
  std::vector<uint8_t> all;
  if (binary) {
    if (binary->size() != per_image * static_cast<size_t>(n))
      bad(where + ": shape " + json(shape).dump() + " needs " +
          std::to_string(per_image * static_cast<size_t>(n)) + " bytes, binary_data_size gives " +
          std::to_string(binary->size()));
    all.assign(binary->begin(), binary->end());
  } else {
    // Flat or nested to any depth, as the protocol allows: flattened in order.
    const json& data = input["data"];
    if (!data.is_array()) bad(where + ".data must be an array of integers 0..255");
    // The shape alone may promise far more values than the body can hold
    // (each takes 2 or more bytes): what is reserved is bounded, the values
    // themselves are counted below.
    all.reserve(std::min(per_image * static_cast<size_t>(n), size_t{1} << 26));
    // Depth-first, left to right, without recursion (a deeply nested body
    // must not exhaust the stack; nlohmann's parser already bounds it).
    std::vector<std::pair<const json*, size_t>> walk{{&data, 0}};
    while (!walk.empty()) {
      auto& [node, at] = walk.back();
      if (at == node->size()) {
        walk.pop_back();
        continue;
      }
      const json& v = (*node)[at++];
      if (v.is_array()) {
        walk.emplace_back(&v, 0);
        continue;
      }
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 255)
        bad(where + ".data holds " + v.dump() + "; UINT8 values are integers 0..255");
      if (all.size() == per_image * static_cast<size_t>(n))
        bad(where + ".data holds more values than its shape " + json(shape).dump() + " has");
      all.push_back(static_cast<uint8_t>(v.get<int64_t>()));
    }
    if (all.size() != per_image * static_cast<size_t>(n))
      bad(where + ".data holds " + std::to_string(all.size()) + " values; its shape " +
          json(shape).dump() + " has " + std::to_string(per_image * static_cast<size_t>(n)));
  }
  for (int64_t i = 0; i < n; ++i) {
    ImageInput image;
    image.label = name + "[" + std::to_string(i) + "]";
    image.encoded = false;
    image.video = video;
    image.frames = frames;
    image.height = h;
    image.width = w;
    const auto first =
        all.begin() + static_cast<std::ptrdiff_t>(per_image * static_cast<size_t>(i));
    image.bytes.assign(first, first + static_cast<std::ptrdiff_t>(per_image));
    add_image(request, std::move(image), limits);
  }
}

std::vector<int64_t> read_shape(const json& input, const std::string& where) {
  const auto it = input.find("shape");
  if (it == input.end() || !it->is_array() || it->empty())
    bad(where + ".shape must be a non-empty array of integers");
  std::vector<int64_t> shape;
  for (const json& d : *it) shape.push_back(count_value(d, where + ".shape"));
  return shape;
}

std::vector<OutputSelection> read_outputs(const json& doc, const std::vector<OutputSpec>& specs) {
  const bool binary_default = bool_parameter(doc, "binary_data_output", "the request");
  std::vector<OutputRequest> asked;
  const auto list = doc.find("outputs");
  if (list != doc.end() && !list->is_array())
    bad("'outputs' must be an array of {\"name\": ...} objects");
  if (list != doc.end()) {
    for (size_t k = 0; k < list->size(); ++k) {
      const json& out = (*list)[k];
      const std::string where = "outputs[" + std::to_string(k) + "]";
      if (!out.is_object() || !out.contains("name") || !out["name"].is_string())
        bad(where + " must be an object with a string 'name'");
      OutputRequest r;
      r.name = out["name"].get<std::string>();
      if (out.contains("parameters")) {
        if (!out["parameters"].is_object()) bad(where + ".parameters must be an object");
        if (out["parameters"].contains("binary_data"))
          r.binary = bool_parameter(out, "binary_data", where);
        if (const auto dt = out["parameters"].find("datatype"); dt != out["parameters"].end())
          r.datatype = dt->is_string() ? dt->get<std::string>() : dt->dump();
      }
      asked.push_back(std::move(r));
    }
    if (asked.empty()) return {};  // an empty list asks for nothing
  }
  return select_outputs(asked, binary_default, specs);
}

// Element i of an item output, as float.
float element(const ItemOutput& out, size_t i) {
  const uint8_t* p = out.bytes.data();
  switch (out.dtype) {
    case EG_DTYPE_F32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case EG_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      const uint32_t bits = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case EG_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
      const float sign = (h & 0x8000) ? -1.0f : 1.0f;
      if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
      if (exponent == 31)
        return mantissa ? std::numeric_limits<float>::quiet_NaN()
                        : sign * std::numeric_limits<float>::infinity();
      return sign * std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
    }
    case EG_DTYPE_F64: {
      double d;
      std::memcpy(&d, p + i * 8, 8);
      return static_cast<float>(d);
    }
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

// Bytes of one element of a selection's datatype (F32, BF16 or the rows' I64).
size_t element_bytes(const OutputSelection& sel) {
  return sel.rows ? 8 : sel.dtype == EG_DTYPE_BF16 ? 2 : 4;
}

// `count` bf16 values at `src` as f32 at `dst` (exact: the bits shifted up).
void widen_bf16(const uint8_t* src, size_t count, uint8_t* dst) {
  for (size_t i = 0; i < count; ++i) {  // (vectorised: shifts of 16-bit lanes)
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    const uint32_t bits = uint32_t{h} << 16;
    std::memcpy(dst + 4 * i, &bits, 4);
  }
}

// Writes elements [first, first + count) of an item output in `dtype` (F32 or
// BF16, the stored dtype differing), little-endian, at `dst`; returns the end.
uint8_t* convert_values(const ItemOutput& out, int32_t dtype, size_t first, size_t count,
                        uint8_t* dst) {
  if (dtype == EG_DTYPE_BF16) {
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = float_to_bf16(element(out, first + i));
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return dst + 2 * count;
  }
  if (out.dtype == EG_DTYPE_BF16) {  // the common widening, without the dtype switch
    widen_bf16(out.bytes.data() + 2 * first, count, dst);
    return dst + 4 * count;
  }
  for (size_t i = 0; i < count; ++i) {
    const float f = element(out, first + i);
    std::memcpy(dst + 4 * i, &f, 4);
  }
  return dst + 4 * count;
}

// Appends an item output's values in `dtype` to `dst`: the stored bytes
// themselves when the dtype already matches (bit for bit), else converted a
// chunk at a time through a buffer that stays in cache: an answer of several
// hundred KiB is one pass over memory the caller reserved (sizing it first
// zero-filled it, a second pass).
void append_values(const ItemOutput& out, int32_t dtype, std::string& dst) {
  if (out.dtype == dtype) {
    dst.append(reinterpret_cast<const char*>(out.bytes.data()), out.bytes.size());
    return;
  }
  constexpr size_t kChunk = 2048;  // elements: 8 KiB of F32
  alignas(4) uint8_t buffer[kChunk * 4];
  const size_t n = static_cast<size_t>(out.rows * out.width);
  for (size_t first = 0; first < n; first += kChunk) {
    const size_t count = std::min(kChunk, n - first);
    const uint8_t* end = convert_values(out, dtype, first, count, buffer);
    dst.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(end - buffer));
  }
}

// The shape and byte size of a selection over `items`, and its bytes written
// at `dst` (when given, sized for them).
struct TensorSize {
  std::vector<int64_t> shape;
  size_t bytes = 0;
};
TensorSize tensor_size(const OutputSelection& sel, const std::vector<ItemPtr>& items) {
  int64_t total_rows = 0, width = 0;
  for (const ItemPtr& item : items) {
    const ItemOutput& out = item->outputs.at(sel.index);
    total_rows += out.rows;
    width = out.width;
  }
  if (sel.rows) return {{static_cast<int64_t>(items.size())}, 8 * items.size()};
  return {{total_rows, width}, static_cast<size_t>(total_rows * width) * element_bytes(sel)};
}
// Appends a selection's bytes over `items` to `dst` (reserved for them by the
// caller).
void append_tensor(const OutputSelection& sel, const std::vector<ItemPtr>& items,
                   std::string& dst) {
  for (const ItemPtr& item : items) {
    const ItemOutput& out = item->outputs.at(sel.index);
    if (sel.rows) {
      char rows[8];
      std::memcpy(rows, &out.rows, 8);
      dst.append(rows, 8);
    } else {
      append_values(out, sel.dtype, dst);
    }
  }
}

// A float as JSON: through double's shortest form, which any JSON parser
// reads back to the same double and so to the same float; NaN and infinities
// (not JSON numbers) as null; negative zero keeps its sign.
void append_number(std::string& s, float f) {
  if (!std::isfinite(f)) {
    s += "null";
    return;
  }
  if (f == 0.0f && std::signbit(f)) {
    s += "-0.0";  // "-0" reads back as the integer 0 in most parsers, losing the sign
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(f));
  s.append(buf, r.ptr);
}

const char* datatype_name(int32_t dtype) {
  return dtype == EG_DTYPE_BF16 ? "BF16" : dtype == EG_DTYPE_I64 ? "INT64" : "FP32";
}

}  // namespace

std::vector<OutputSelection> select_outputs(const std::vector<OutputRequest>& asked,
                                            bool binary_default,
                                            const std::vector<OutputSpec>& specs) {
  std::vector<OutputSelection> all;
  for (size_t o = 0; o < specs.size(); ++o) {
    all.push_back({specs[o].name, o, false, EG_DTYPE_F32, binary_default});
    all.push_back({specs[o].name + kRowsSuffix, o, true, EG_DTYPE_I64, binary_default});
  }
  if (asked.empty()) return all;
  std::vector<OutputSelection> chosen;
  for (size_t k = 0; k < asked.size(); ++k) {
    const OutputRequest& out = asked[k];
    const std::string where = "outputs[" + std::to_string(k) + "]";
    std::string known;
    const OutputSelection* found = nullptr;
    for (const OutputSelection& s : all) {
      known += (known.empty() ? "" : ", ") + s.name;
      if (s.name == out.name) found = &s;
    }
    if (!found)
      bad(where + " names '" + out.name + "', which the model does not have (it has " + known +
          ")");
    OutputSelection s = *found;
    if (out.binary) s.binary = *out.binary;
    if (out.datatype) {
      const std::string& d = *out.datatype;
      if (s.rows && d != "INT64") bad(where + ": row counts are INT64, not " + d);
      if (!s.rows && d == "FP32")
        s.dtype = EG_DTYPE_F32;
      else if (!s.rows && d == "BF16")
        s.dtype = EG_DTYPE_BF16;
      else if (!s.rows)
        bad(where + ".parameters.datatype is " + d + "; outputs come as \"FP32\" or \"BF16\"");
    }
    chosen.push_back(s);
  }
  return chosen;
}

std::vector<int64_t> append_output(const OutputSelection& sel, const std::vector<ItemPtr>& items,
                                   std::string& dst) {
  TensorSize size = tensor_size(sel, items);
  dst.reserve(dst.size() + size.bytes);
  append_tensor(sel, items, dst);
  return std::move(size.shape);
}

OutputTensor encode_output(const OutputSelection& sel, const std::vector<ItemPtr>& items) {
  std::string bytes;
  OutputTensor t;
  t.shape = append_output(sel, items, bytes);
  t.bytes.assign(bytes.begin(), bytes.end());
  return t;
}

bool asks_f32(const InferRequest& request) {
  return std::any_of(request.outputs.begin(), request.outputs.end(),
                     [](const OutputSelection& s) { return !s.rows && s.dtype == EG_DTYPE_F32; });
}

ItemPtr widened_to_f32(const ItemOutputs& item) {
  const bool any = std::any_of(item.outputs.begin(), item.outputs.end(),
                               [](const ItemOutput& o) { return o.dtype == EG_DTYPE_BF16; });
  if (!any) return nullptr;
  auto wide = std::make_shared<ItemOutputs>();
  wide->key = item.key;
  wide->outputs.reserve(item.outputs.size());
  for (const ItemOutput& o : item.outputs) {
    if (o.dtype != EG_DTYPE_BF16) {
      wide->outputs.push_back(o);
      continue;
    }
    ItemOutput w{EG_DTYPE_F32, o.rows, o.width, std::vector<uint8_t>(2 * o.bytes.size())};
    widen_bf16(o.bytes.data(), o.bytes.size() / 2, w.bytes.data());
    wide->outputs.push_back(std::move(w));
  }
  return wide;
}

const char* selection_datatype(const OutputSelection& selection) {
  return datatype_name(selection.rows ? EG_DTYPE_I64 : selection.dtype);
}

InferRequest parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                 const std::vector<OutputSpec>& outputs,
                                 const RequestLimits& limits) {
  if (header_length && *header_length > body.size())
    bad("Inference-Header-Content-Length is " + std::to_string(*header_length) +
        " but the body holds " + std::to_string(body.size()) + " bytes");
  const std::string_view header = header_length ? body.substr(0, *header_length) : body;
  BinaryPart binary(header_length ? body.substr(*header_length) : std::string_view{});
  json doc;
  try {
    doc = json::parse(header.begin(), header.end());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number past double's range.
    bad(std::string("the request's JSON is malformed (") + e.what() +
        "); send an object {\"inputs\": [...]} (with binary data, the JSON header's length "
        "in Inference-Header-Content-Length)");
  }
  if (!doc.is_object()) bad("the request must be a JSON object {\"inputs\": [...]}");
  InferRequest request;
  if (const auto id = doc.find("id"); id != doc.end()) {
    if (!id->is_string()) bad("'id' must be a string");
    request.id = id->get<std::string>();
  }
  const auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array() || inputs->empty())
    bad("the request needs 'inputs': a non-empty array of tensors named '" +
        std::string(kImagesInput) + "' (BYTES) or '" + kPixelsInput + "' (UINT8)");
  for (size_t k = 0; k < inputs->size(); ++k) {
    const json& input = (*inputs)[k];
    const std::string where = "inputs[" + std::to_string(k) + "]";
    if (!input.is_object() || !input.contains("name") || !input["name"].is_string() ||
        !input.contains("datatype") || !input["datatype"].is_string())
      bad(where + " must be an object with string 'name' and 'datatype'");
    const std::string name = input["name"].get<std::string>();
    const std::string datatype = input["datatype"].get<std::string>();
    const std::vector<int64_t> shape = read_shape(input, where + " ('" + name + "')");
    int64_t elements = 1;
    for (int64_t d : shape) {
      if (d != 0 && elements > (int64_t{1} << 40) / d)
        bad(where + " ('" + name + "') has a shape too large: " + json(shape).dump());
      elements *= d;
    }
    std::optional<std::string_view> data;
    if (const auto params = input.find("parameters"); params != input.end()) {
      if (!params->is_object()) bad(where + ".parameters must be an object");
      if (const auto size = params->find("binary_data_size"); size != params->end()) {
        if (!header_length)
          bad(where +
              " has binary_data_size but the request has no "
              "Inference-Header-Content-Length header saying where the JSON ends");
        if (input.contains("data")) bad(where + " has both 'data' and binary_data_size; send one");
        data = binary.take(
            static_cast<uint64_t>(count_value(*size, where + ".parameters.binary_data_size")),
            where);
      }
    }
    if (!data && !input.contains("data"))
      bad(where + " ('" + name + "') has neither 'data' nor parameters.binary_data_size");
    if (name == kImagesInput || name == kVideosInput) {
      const bool video = name == kVideosInput;
      if (datatype != "BYTES")
        bad(where + " ('" + name + "') has datatype " + datatype +
            (video ? std::string("; video files are BYTES (for raw frames use the UINT8 input '") +
                         kFramesInput + "')"
                   : std::string("; encoded images are BYTES (for raw pixels use the UINT8 "
                                 "input '") +
                         kPixelsInput + "')"));
      if (shape.size() > 2 || (shape.size() == 2 && shape[1] != 1))
        bad(where + " ('" + name + "') has shape " + json(shape).dump() + "; " +
            (video ? "video files" : "encoded images") + " are [N] (or [N, 1])");
      if (elements > limits.max_items)
        bad(where + " ('" + name + "') holds " + std::to_string(elements) +
            " images, more than serve.max_items_per_request (" + std::to_string(limits.max_items) +
            "); split it into several requests");
      read_images(input, where + " ('" + name + "')", elements, data, request, limits);
    } else if (name == kPixelsInput || name == kFramesInput) {
      if (datatype != "UINT8")
        bad(where + " ('" + name + "') has datatype " + datatype + "; raw " +
            (name == kFramesInput ? "frames" : "pixels") +
            " are UINT8 (for files use the BYTES input '" +
            (name == kFramesInput ? kVideosInput : kImagesInput) + "')");
      read_pixels(input, where + " ('" + name + "')", shape, data, request, limits);
    } else {
      bad(where + " is named '" + name + "'; the inputs are '" + kImagesInput +
          "' (BYTES: PNG or JPEG files), '" + kPixelsInput + "' (UINT8 [H, W, 3] pixels), and " +
          "for models that take videos '" + kVideosInput + "' (BYTES: video files) and '" +
          kFramesInput + "' (UINT8 [F, H, W, 3] frames)");
    }
  }
  if (binary.left() != 0)
    bad(std::to_string(binary.left()) +
        " bytes follow the inputs' binary data; their binary_data_size values must add up to "
        "the body's length after the JSON header");
  if (request.images.empty()) bad("the request holds no image (its inputs have 0 elements)");
  request.outputs = read_outputs(doc, outputs);
  return request;
}

EncodedBody encode_infer_response(const std::string& model_name, const InferRequest& request,
                                  const std::vector<ItemPtr>& items) {
  std::string head = "{\"model_name\":" + json_string(model_name) + ",\"model_version\":\"1\"";
  if (!request.id.empty()) head += ",\"id\":" + json_string(request.id);
  head += ",\"outputs\":[";
  // Binary tensors are appended once, straight after the JSON header, to the
  // body reserved for them; only JSON data goes through a tensor of its own.
  std::vector<const OutputSelection*> binary;
  size_t binary_bytes = 0;
  for (size_t k = 0; k < request.outputs.size(); ++k) {
    const OutputSelection& sel = request.outputs[k];
    if (k) head += ",";
    head += "{\"name\":" + json_string(sel.name) + ",\"datatype\":\"" + selection_datatype(sel) +
            "\",\"shape\":[";
    const TensorSize size = tensor_size(sel, items);
    for (size_t d = 0; d < size.shape.size(); ++d) {
      if (d) head += ',';
      head += std::to_string(size.shape[d]);
    }
    head += "]";
    if (sel.binary) {
      head += ",\"parameters\":{\"binary_data_size\":" + std::to_string(size.bytes) + "}}";
      binary.push_back(&sel);
      binary_bytes += size.bytes;
      continue;
    }
    head += ",\"data\":[";
    if (sel.rows) {
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) head += ',';
        head += std::to_string(items[i]->outputs.at(sel.index).rows);
      }
    } else {
      const OutputTensor tensor = encode_output(sel, items);
      const std::vector<uint8_t>& bytes = tensor.bytes;
      const size_t width = element_bytes(sel);
      head.reserve(head.size() + bytes.size() / width * 14);
      for (size_t i = 0; i * width < bytes.size(); ++i) {
        if (i) head += ',';
        float f;
        if (sel.dtype == EG_DTYPE_BF16) {
          uint16_t h;
          std::memcpy(&h, bytes.data() + i * 2, 2);
          const uint32_t bits = uint32_t{h} << 16;
          std::memcpy(&f, &bits, 4);
        } else {
          std::memcpy(&f, bytes.data() + i * 4, 4);
        }
        append_number(head, f);
      }
    }
    head += "]}";
  }
  head += "]}";
  EncodedBody out;
  if (binary.empty()) {
    out.body.add(std::move(head));
    return out;
  }
  out.header_length = head.size();
  out.body.add(std::move(head));
  // An output stored in the datatype asked is sent as stored; what must be
  // converted (and row counts) is written here, between those parts.
  std::string made;
  for (const OutputSelection* sel : binary)
    for (const ItemPtr& item : items) {
      const ItemOutput& o = item->outputs.at(sel->index);
      if (sel->rows) {
        char rows[8];
        std::memcpy(rows, &o.rows, 8);
        made.append(rows, 8);
      } else if (o.dtype == sel->dtype) {
        out.body.add(std::exchange(made, std::string()));
        out.body.add(item, o.bytes.data(), o.bytes.size());
      } else {
        if (made.empty()) made.reserve(binary_bytes);
        append_values(o, sel->dtype, made);
      }
    }
  out.body.add(std::move(made));
  return out;
}

std::string model_metadata_json(const std::string& model_name, const std::string& platform,
                                const std::vector<OutputSpec>& outputs, bool video) {
  std::string s = "{\"name\":" + json_string(model_name) +
                  ",\"versions\":[\"1\"],\"platform\":" + json_string(platform) +
                  ",\"inputs\":[{\"name\":\"" + kImagesInput +
                  "\",\"datatype\":\"BYTES\",\"shape\":[-1]},{\"name\":\"" + kPixelsInput +
                  "\",\"datatype\":\"UINT8\",\"shape\":[-1,-1,3]}";
  if (video)
    s += std::string(",{\"name\":\"") + kVideosInput +
         "\",\"datatype\":\"BYTES\",\"shape\":[-1]},{\"name\":\"" + kFramesInput +
         "\",\"datatype\":\"UINT8\",\"shape\":[-1,-1,-1,3]}";
  s += "],\"outputs\":[";
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (o) s += ',';
    s += "{\"name\":" + json_string(outputs[o].name) + ",\"datatype\":\"FP32\",\"shape\":[-1," +
         std::to_string(outputs[o].width) +
         "]},{\"name\":" + json_string(outputs[o].name + kRowsSuffix) +
         ",\"datatype\":\"INT64\",\"shape\":[-1]}";
  }
  return s + "]}";
}

std::pair<int, std::string> http_error(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const ProtocolError& e) {
    return {e.status(), e.what()};
  } catch (const Error& e) {
    const bool input = e.kind() == ErrorKind::Input || e.kind() == ErrorKind::Config;
    return {input ? 400 : 500, e.what()};
  } catch (const std::bad_alloc&) {
    return {500, "out of memory while answering the request"};
  } catch (const std::exception& e) {
    return {500, e.what()};
  } catch (...) {
    return {500, "an unknown error"};
  }
}

std::string error_json(const std::string& message) {
  return "{\"error\":" + json_string(message) + "}";
}

std::string json_string(std::string_view text) {
  // nlohmann escapes control characters and replaces invalid UTF-8.
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::vector<uint8_t>> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" is not base64
    uint32_t word = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = k >= 4 - pad ? 0 : value(text[i + static_cast<size_t>(k)]);
      if (v < 0) return std::nullopt;
      word = (word << 6) | static_cast<uint32_t>(v);
    }
    out.push_back(static_cast<uint8_t>(word >> 16));
    if (pad < 2) out.push_back(static_cast<uint8_t>(word >> 8));
    if (pad < 1) out.push_back(static_cast<uint8_t>(word));
  }
  return out;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stays a NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace encgraph::host::serve
