// GrpcEndpoint in a build without gRPC: `--grpc` is refused with the fix.
#include "serve/grpc_endpoint.hpp"

#include <encgraph/error.hpp>

namespace encgraph::host::serve {

class GrpcEndpoint::Service {};
struct GrpcEndpoint::Server {};

GrpcEndpoint::GrpcEndpoint(ServeApp&, const std::string&, int64_t) {
  throw_config(
      "--grpc: this encgraph was built without gRPC (configured with -DENCGRAPH_GRPC=OFF, or "
      "configure found no pkg-config grpc++ and protobuf, protoc or grpc_cpp_plugin); install "
      "Debian's libgrpc++-dev and protobuf-compiler-grpc (scripts/setup-deps.sh) and rebuild "
      "with ENCGRAPH_GRPC=ON, or serve over HTTP only");
}
GrpcEndpoint::~GrpcEndpoint() = default;
int GrpcEndpoint::port() const {
  return -1;
}
int64_t GrpcEndpoint::active_requests() const {
  return 0;
}
void GrpcEndpoint::shutdown() {}

}  // namespace encgraph::host::serve
