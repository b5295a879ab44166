// `encgraph serve` put together: the models (one config, or a repository
// folder of TOML configs loaded and unloaded at run time), the routes of the
// Open Inference Protocol over the HTTP server, the decoding thread pool, the
// metrics and the access log, and the drain on SIGTERM or SIGINT.
#pragma once

#include "config.hpp"
#include "serve/batch_scheduler.hpp"
#include "serve/grpc_endpoint.hpp"
#include "serve/http_server.hpp"
#include "serve/model_service.hpp"
#include "serve/serve_metrics.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace encgraph::host::serve {

struct ServeOptions {
  ServeConfig server;  // host, port, threads, max_body_bytes, request_timeout_ms
  // One model: its name and config. Or a repository folder.
  std::optional<std::pair<std::string, HostConfig>> model;
  std::filesystem::path repository;
  std::vector<std::string> overrides;  // --set, applied to every repository config
  // --grpc HOST:PORT: the gRPC endpoint's address; port -1: no gRPC endpoint.
  std::string grpc_host;
  int64_t grpc_port = -1;
};

class ServeApp {
 public:
  explicit ServeApp(ServeOptions options);
  ~ServeApp();
  // Loads the models, listens, prints "listening on http://HOST:PORT" to
  // stdout (then "listening on grpc://HOST:PORT" with --grpc), and serves until SIGTERM or SIGINT;
  // then refuses new requests, answers every accepted one, and returns.
  void run();

 private:
  void handle(HttpRequest&& request, const std::string& remote, Reply reply);
  void route(HttpRequest& request, const Reply& reply);
  void infer(const std::string& model, HttpRequest& request, const Reply& reply);
  // Decodes a parsed request's images (on the calling thread) and queues
  // them on `service`; `done` gets the items or the error. Decoding errors
  // are thrown.
  void submit(ModelService& service, InferRequest& parsed, ModelService::Done done);
  void repository(const std::string& model, const std::string& action, HttpRequest& request,
                  const Reply& reply);
  std::shared_ptr<ModelService> find(const std::string& model);
  std::shared_ptr<ModelService> load(const std::string& model);
  // The repository's load (or reload) and unload; ProtocolError on refusal.
  void load_model(const std::string& model);
  void unload_model(const std::string& model);
  std::string metrics_text();
  void drain();
  // Stops the server once every accepted request is answered.
  void poll_drain();

  ServeOptions options_;
  SteadyClock clock_;
  ServeMetrics metrics_;
  boost::asio::io_context io_;
  boost::asio::thread_pool pool_;  // parsing, decoding, hashing, repository loads
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<GrpcEndpoint> grpc_;
  std::optional<boost::asio::steady_timer> drain_timer_;
  std::mutex models_mutex_;
  std::map<std::string, std::shared_ptr<ModelService>> models_;
  std::atomic<uint64_t> next_request_{1};
  std::atomic<bool> draining_{false};

  // The gRPC endpoint answers from the same models, pool, limits and metrics.
  friend class GrpcEndpoint;
  friend class GrpcEndpoint::Service;
};

}  // namespace encgraph::host::serve
