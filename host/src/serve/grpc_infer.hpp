// The gRPC form of the infer protocol (inference.proto): a ModelInferRequest
// into the InferRequest the HTTP path parses too, and the items' outputs into
// a ModelInferResponse, each output's bytes in raw_output_contents as
// Triton's and KServe's gRPC clients read them. The inputs and their limits
// are the HTTP ones (docs/serving.md): "images" BYTES [N] (one PNG or JPEG
// file per element) and "pixels" UINT8 [H, W, 3] or [N, H, W, 3], sent in
// raw_input_contents or in contents (bytes_contents, uint_contents).
#pragma once

#include "serve/infer_protocol.hpp"

#include <inference.pb.h>

#include <grpcpp/support/status.h>

#include <exception>

namespace encgraph::host::serve {

// Throws ProtocolError (400) naming the input, element or parameter at fault.
InferRequest parse_grpc_infer_request(const inference::ModelInferRequest& message,
                                      const std::vector<OutputSpec>& outputs,
                                      const RequestLimits& limits);

void fill_grpc_infer_response(const std::string& model_name, const InferRequest& request,
                              const std::vector<ItemPtr>& items,
                              inference::ModelInferResponse& response);

// The gRPC status of an HTTP status: 400 INVALID_ARGUMENT, 404 NOT_FOUND,
// 413 and 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED,
// 405 UNIMPLEMENTED, others INTERNAL.
grpc::StatusCode grpc_code(int http_status);

// The status answering an error (as http_error classifies it).
grpc::Status grpc_error(const std::exception_ptr& error);

}  // namespace encgraph::host::serve
