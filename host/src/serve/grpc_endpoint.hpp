// The gRPC endpoint of `encgraph serve` (--grpc HOST:PORT): the Open
// Inference Protocol's GRPCInferenceService (inference.proto) answered from
// the same ServeApp as HTTP, so that both share the models, their schedulers
// (one batch may hold HTTP and gRPC requests alike), caches, limits and
// metrics. Built only with gRPC (ENCGRAPH_WITH_GRPC).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace encgraph::host::serve {

class ServeApp;

class GrpcEndpoint {
 public:
  // Listens on host:port (port 0: a free one); throws a config error naming
  // --grpc when it cannot.
  GrpcEndpoint(ServeApp& app, const std::string& host, int64_t port);
  ~GrpcEndpoint();
  int port() const;
  // Infer calls accepted and not yet answered (the drain waits for them).
  int64_t active_requests() const;
  // Stops the server; calls still open are cancelled.
  void shutdown();

  class Service;  // the generated service's implementation (grpc_endpoint.cpp)

 private:
  std::unique_ptr<Service> service_;
  struct Server;
  std::unique_ptr<Server> server_;
};

}  // namespace encgraph::host::serve
