// The Open Inference Protocol (KServe v2) requests and responses that
// `encgraph serve` speaks over HTTP: JSON tensors, and Triton's binary-tensor
// extension (a JSON header of Inference-Header-Content-Length bytes, then the
// tensors' bytes in input order, each sized by its binary_data_size). No
// sockets here: bodies in, bodies out, every refusal a ProtocolError whose
// status and message are the HTTP answer.
#pragma once

#include "serve/body_parts.hpp"
#include "serve/embedding_cache.hpp"

#include <encgraph/output_spec.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace encgraph::host::serve {

// A refused request: the HTTP status (400, 404, 413, 429, ...) and a message
// naming the input, key or item at fault and the fix.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The model's input tensors: "images" (BYTES, one PNG or JPEG file per
// element) and "pixels" (UINT8 [H, W, 3], or [N, H, W, 3] for N images);
// for models that take videos, "videos" (BYTES, one video file
// per element, its frames sampled as `encgraph encode` samples a file's) and
// "frames" (UINT8 [F, H, W, 3]: one video of F frames, all used, or
// [N, F, H, W, 3] for N videos).
inline constexpr const char* kImagesInput = "images";
inline constexpr const char* kPixelsInput = "pixels";
inline constexpr const char* kVideosInput = "videos";
inline constexpr const char* kFramesInput = "frames";
// Each output X comes with "X_rows" (INT64 [N]): the rows of every item.
inline constexpr const char* kRowsSuffix = "_rows";

// One item of a request (an image or a video), in request order.
struct ImageInput {
  std::string label;           // "images[3]", "pixels[0]", "videos[1]": what errors name
  bool encoded = true;         // a PNG/JPEG (or video) file; else raw RGB pixels
  bool video = false;          // a video item: a video file, or frames
  std::vector<uint8_t> bytes;  // the file, or frames x height x width x 3 pixels
  int64_t height = 0;          // raw pixels only
  int64_t width = 0;
  int64_t frames = 1;
};

// One tensor the response carries: output `index` of the model (or its row
// counts), in `dtype` (EG_DTYPE_F32 or EG_DTYPE_BF16 for outputs).
struct OutputSelection {
  std::string name;
  size_t index = 0;
  bool rows = false;    // the "_rows" tensor of output `index`
  int32_t dtype = 0;    // eg_dtype of the values (ignored for rows)
  bool binary = false;  // in the binary part rather than as JSON data
};

struct InferRequest {
  std::string id;  // echoed in the response when given
  std::vector<ImageInput> images;
  std::vector<OutputSelection> outputs;  // every output and its rows when not asked
};

struct RequestLimits {
  int64_t max_items = 64;         // serve.max_items_per_request
  int64_t max_pixels = 16777216;  // serve.max_pixels, per raw image (or frame)
  int64_t max_frames = 4096;      // limits.max_frames_per_video, per raw video
};

// One entry of a request's outputs list, as JSON or gRPC sends it: the name
// and, when given, parameters.binary_data and parameters.datatype.
struct OutputRequest {
  std::string name;
  std::optional<bool> binary;
  std::optional<std::string> datatype;
};

// The tensors a response carries: every output and its rows (binary when
// `binary_default`) when `asked` is empty, else those asked, in order.
// Errors name entry k as outputs[k]. Throws ProtocolError (400).
std::vector<OutputSelection> select_outputs(const std::vector<OutputRequest>& asked,
                                            bool binary_default,
                                            const std::vector<OutputSpec>& specs);

// Parses an infer request body. `header_length`: the value of the
// Inference-Header-Content-Length header, when sent. `outputs`: the model's.
// Throws ProtocolError (400) naming what is wrong.
InferRequest parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                 const std::vector<OutputSpec>& outputs,
                                 const RequestLimits& limits);

// A response body; header_length set when it has a binary part (the
// Inference-Header-Content-Length to send). Binary outputs stored in the
// datatype asked are parts that point into the items (kept alive by them).
struct EncodedBody {
  BodyParts body;
  std::optional<size_t> header_length;
};

// One response tensor: its shape ([total rows, width], or [items] for row
// counts) and little-endian bytes in the selection's datatype.
struct OutputTensor {
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
OutputTensor encode_output(const OutputSelection& selection, const std::vector<ItemPtr>& items);
// The same bytes appended to `dst` (reserved for them first); returns the shape.
std::vector<int64_t> append_output(const OutputSelection& selection,
                                   const std::vector<ItemPtr>& items, std::string& dst);

// Whether a response to `request` carries an output in FP32 (the default).
bool asks_f32(const InferRequest& request);
// The same outputs with every bf16 one widened to f32 (exactly: a bf16 value
// is an f32 with its low 16 bits zero); null when none is bf16. An answer in
// FP32 then sends the stored bytes as they are.
ItemPtr widened_to_f32(const ItemOutputs& item);

// "FP32", "BF16" or "INT64": the protocol's name of a selection's datatype.
const char* selection_datatype(const OutputSelection& selection);

// The response to `request` from its items' outputs (items[i]: image i's).
EncodedBody encode_infer_response(const std::string& model_name, const InferRequest& request,
                                  const std::vector<ItemPtr>& items);

// The model metadata document (GET /v2/models/{name}).
// `video`: the model takes videos (its inputs then list "videos" and "frames").
std::string model_metadata_json(const std::string& model_name, const std::string& platform,
                                const std::vector<OutputSpec>& outputs, bool video);

// The HTTP status and message answering an error: a ProtocolError carries
// its own; an encgraph::Error of bad input (Input, Config) is 400; anything
// else is the server's fault, 500.
std::pair<int, std::string> http_error(const std::exception_ptr& error);

// {"error": message}, as the protocol answers failures.
std::string error_json(const std::string& message);

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

// Standard base64 (padding required); nullopt when `text` is not base64.
std::optional<std::vector<uint8_t>> decode_base64(std::string_view text);

// A float rounded to bfloat16 (nearest, ties to even; NaN stays NaN).
uint16_t float_to_bf16(float value);

}  // namespace encgraph::host::serve
