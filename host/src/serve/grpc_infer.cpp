#include "serve/grpc_infer.hpp"

#include <encgraph/plugin_api.h>

#include <string_view>

namespace encgraph::host::serve {
namespace {

[[noreturn]] void bad(const std::string& message) {
  throw ProtocolError(400, message);
}

std::string shape_text(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string s = "[";
  for (int d = 0; d < shape.size(); ++d) {
    if (d) s += ',';
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

// A bool parameter of `params`, or `fallback` when absent.
template <class Map>
bool bool_parameter(const Map& params, const std::string& key, const std::string& where,
                    bool fallback) {
  const auto it = params.find(key);
  if (it == params.end()) return fallback;
  if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam)
    bad(where + ".parameters['" + key + "'] must be a bool_param");
  return it->second.bool_param();
}

void add_image(InferRequest& request, ImageInput image, const RequestLimits& limits) {
  if (static_cast<int64_t>(request.images.size()) >= limits.max_items)
    bad("the request holds more than " + std::to_string(limits.max_items) +
        " images (serve.max_items_per_request); split it into several requests");
  request.images.push_back(std::move(image));
}

void read_images(const inference::ModelInferRequest::InferInputTensor& input,
                 const std::string& where, int64_t count, const std::string* raw,
                 InferRequest& request, const RequestLimits& limits) {
  if (count > limits.max_items)
    bad(where + " holds " + std::to_string(count) +
        " images, more than serve.max_items_per_request (" + std::to_string(limits.max_items) +
        "); split it into several requests");
  const auto element = [&](int64_t i, std::string_view bytes) {
    ImageInput image;
    image.label = input.name() + "[" + std::to_string(i) + "]";
    image.video = input.name() == kVideosInput;
    image.bytes.assign(bytes.begin(), bytes.end());
    add_image(request, std::move(image), limits);
  };
  if (raw) {
    // Triton's layout of BYTES: each element a little-endian uint32 length, then the bytes.
    std::string_view rest = *raw;
    for (int64_t i = 0; i < count; ++i) {
      if (rest.size() < 4)
        bad(where + ": its raw_input_contents end before element " + std::to_string(i) +
            "'s 4-byte length (BYTES elements are a little-endian uint32 length, then the bytes)");
      uint32_t size = 0;
      for (int b = 3; b >= 0; --b) size = (size << 8) | static_cast<uint8_t>(rest[b]);
      rest.remove_prefix(4);
      if (size > rest.size())
        bad(where + ": element " + std::to_string(i) + " declares " + std::to_string(size) +
            " bytes but " + std::to_string(rest.size()) + " remain: the data is truncated");
      element(i, rest.substr(0, size));
      rest.remove_prefix(size);
    }
    if (!rest.empty())
      bad(where + ": " + std::to_string(rest.size()) + " bytes follow its " +
          std::to_string(count) + " elements; the shape and the data disagree");
    return;
  }
  const auto& contents = input.contents().bytes_contents();
  if (contents.size() != count)
    bad(where + " has " + std::to_string(contents.size()) + " contents.bytes_contents for shape " +
        shape_text(input.shape()) + "; send one " +
        (input.name() == kVideosInput ? "video" : "PNG or JPEG") + " file per element");
  for (int64_t i = 0; i < count; ++i) element(i, contents[static_cast<int>(i)]);
}

void read_pixels(const inference::ModelInferRequest::InferInputTensor& input,
                 const std::string& where, const std::string* raw, InferRequest& request,
                 const RequestLimits& limits) {
  const auto& shape = input.shape();
  const bool video = input.name() == kFramesInput;
  const int rank = video ? 4 : 3;  // one item's
  if ((shape.size() != rank && shape.size() != rank + 1) || shape[shape.size() - 1] != 3)
    bad(where + " has shape " + shape_text(shape) +
        (video ? "; UINT8 frames are [frames, height, width, 3] or [videos, frames, height, "
                 "width, 3] (RGB)"
               : "; UINT8 pixels are [height, width, 3] or [images, height, width, 3] (RGB)"));
  const int64_t n = shape.size() == rank + 1 ? shape[0] : 1;
  const int64_t frames = video ? shape[shape.size() - 4] : 1;
  const int64_t h = shape[shape.size() - 3], w = shape[shape.size() - 2];
  if (h < 1 || w < 1 || n < 0) bad(where + ": height and width must be at least 1");
  if (frames < 1) bad(where + ": a video needs at least 1 frame");
  if (frames > limits.max_frames)
    bad(where + ": " + std::to_string(frames) + " frames are over the limit of " +
        std::to_string(limits.max_frames) +
        " frames per video (limits.max_frames_per_video); send fewer frames");
  if (h > limits.max_pixels / w)
    bad(where + ": " + std::to_string(w) + "x" + std::to_string(h) + " is over the limit of " +
        std::to_string(limits.max_pixels) +
        " pixels per image (serve.max_pixels); send a smaller image");
  if (n > limits.max_items)
    bad(where + " holds " + std::to_string(n) + " images, more than serve.max_items_per_request (" +
        std::to_string(limits.max_items) + "); split it into several requests");
  const size_t per_image = static_cast<size_t>(frames * h * w * 3);
  const size_t total = per_image * static_cast<size_t>(n);
  std::vector<uint8_t> all;
  if (raw) {
    if (raw->size() != total)
      bad(where + ": shape " + shape_text(shape) + " needs " + std::to_string(total) +
          " bytes, raw_input_contents holds " + std::to_string(raw->size()));
    all.assign(raw->begin(), raw->end());
  } else {
    const auto& values = input.contents().uint_contents();
    if (static_cast<size_t>(values.size()) != total)
      bad(where + " has " + std::to_string(values.size()) + " contents.uint_contents; its shape " +
          shape_text(shape) + " has " + std::to_string(total));
    all.reserve(total);
    for (const uint32_t v : values) {
      if (v > 255)
        bad(where + ".contents holds " + std::to_string(v) + "; UINT8 values are 0..255");
      all.push_back(static_cast<uint8_t>(v));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    ImageInput image;
    image.label = input.name() + "[" + std::to_string(i) + "]";
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

}  // namespace

InferRequest parse_grpc_infer_request(const inference::ModelInferRequest& message,
                                      const std::vector<OutputSpec>& outputs,
                                      const RequestLimits& limits) {
  InferRequest request;
  request.id = message.id();
  if (message.inputs().empty())
    bad("the request needs inputs: tensors named '" + std::string(kImagesInput) + "' (BYTES) or '" +
        kPixelsInput + "' (UINT8)");
  const int raw_count = message.raw_input_contents_size();
  if (raw_count != 0 && raw_count != message.inputs_size())
    bad("the request has " + std::to_string(raw_count) + " raw_input_contents for " +
        std::to_string(message.inputs_size()) +
        " inputs; send every input's data there (one entry per input, in order) or none");
  for (int k = 0; k < message.inputs_size(); ++k) {
    const auto& input = message.inputs(k);
    const std::string where = "inputs[" + std::to_string(k) + "] ('" + input.name() + "')";
    if (input.shape().empty()) bad(where + ".shape must be a non-empty list of sizes");
    int64_t elements = 1;
    for (const int64_t d : input.shape()) {
      if (d < 0) bad(where + ".shape " + shape_text(input.shape()) + " holds a negative size");
      if (d != 0 && elements > (int64_t{1} << 40) / d)
        bad(where + " has a shape too large: " + shape_text(input.shape()));
      elements *= d;
    }
    const std::string* raw = raw_count ? &message.raw_input_contents(k) : nullptr;
    if (raw && input.has_contents())
      bad(where + " has both contents and raw_input_contents; send one");
    if (input.name() == kImagesInput || input.name() == kVideosInput) {
      const bool video = input.name() == kVideosInput;
      if (input.datatype() != "BYTES")
        bad(where + " has datatype " + input.datatype() +
            (video ? std::string("; video files are BYTES (for raw frames use the UINT8 input '") +
                         kFramesInput + "')"
                   : std::string("; encoded images are BYTES (for raw pixels use the UINT8 "
                                 "input '") +
                         kPixelsInput + "')"));
      if (input.shape_size() > 2 || (input.shape_size() == 2 && input.shape(1) != 1))
        bad(where + " has shape " + shape_text(input.shape()) + "; " +
            (video ? "video files" : "encoded images") + " are [N] (or [N, 1])");
      read_images(input, where, elements, raw, request, limits);
    } else if (input.name() == kPixelsInput || input.name() == kFramesInput) {
      const bool video = input.name() == kFramesInput;
      if (input.datatype() != "UINT8")
        bad(where + " has datatype " + input.datatype() + "; raw " + (video ? "frames" : "pixels") +
            " are UINT8 (for files use the BYTES input '" + (video ? kVideosInput : kImagesInput) +
            "')");
      read_pixels(input, where, raw, request, limits);
    } else {
      bad("inputs[" + std::to_string(k) + "] is named '" + input.name() + "'; the inputs are '" +
          kImagesInput + "' (BYTES: PNG or JPEG files), '" + kPixelsInput +
          "' (UINT8 [H, W, 3] pixels), and for models that take videos '" + kVideosInput +
          "' (BYTES: video files) and '" + kFramesInput + "' (UINT8 [F, H, W, 3] frames)");
    }
  }
  if (request.images.empty()) bad("the request holds no image (its inputs have 0 elements)");
  std::vector<OutputRequest> asked;
  for (int k = 0; k < message.outputs_size(); ++k) {
    const auto& out = message.outputs(k);
    const std::string where = "outputs[" + std::to_string(k) + "]";
    OutputRequest r;
    r.name = out.name();
    if (const auto dt = out.parameters().find("datatype"); dt != out.parameters().end()) {
      if (dt->second.parameter_choice_case() != inference::InferParameter::kStringParam)
        bad(where + ".parameters['datatype'] must be a string_param, \"FP32\" or \"BF16\"");
      r.datatype = dt->second.string_param();
    }
    // binary_data is HTTP's: every gRPC output is raw bytes. Checked, then ignored.
    bool_parameter(out.parameters(), "binary_data", where, true);
    asked.push_back(std::move(r));
  }
  request.outputs = select_outputs(asked, true, outputs);
  return request;
}

void fill_grpc_infer_response(const std::string& model_name, const InferRequest& request,
                              const std::vector<ItemPtr>& items,
                              inference::ModelInferResponse& response) {
  response.set_model_name(model_name);
  response.set_model_version("1");
  response.set_id(request.id);
  for (const OutputSelection& sel : request.outputs) {
    auto* out = response.add_outputs();
    out->set_name(sel.name);
    out->set_datatype(selection_datatype(sel));
    // Written straight into the response's raw contents: no tensor of its own.
    for (const int64_t d : append_output(sel, items, *response.add_raw_output_contents()))
      out->add_shape(d);
  }
}

grpc::StatusCode grpc_code(int http_status) {
  switch (http_status) {
    case 400: return grpc::StatusCode::INVALID_ARGUMENT;
    case 404: return grpc::StatusCode::NOT_FOUND;
    case 405: return grpc::StatusCode::UNIMPLEMENTED;
    case 413:
    case 429: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503: return grpc::StatusCode::UNAVAILABLE;
    case 504: return grpc::StatusCode::DEADLINE_EXCEEDED;
    default: return http_status < 400 ? grpc::StatusCode::OK : grpc::StatusCode::INTERNAL;
  }
}

grpc::Status grpc_error(const std::exception_ptr& error) {
  const auto [status, message] = http_error(error);
  return grpc::Status(grpc_code(status), message);
}

}  // namespace encgraph::host::serve
