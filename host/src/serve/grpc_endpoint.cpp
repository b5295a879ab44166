// GRPCInferenceService over gRPC's callback API: every RPC answers from the
// ServeApp that HTTP uses. Infer calls are parsed on gRPC's thread, decoded on
// the app's pool and queued on the model's scheduler beside HTTP requests;
// the answer (or the error, as a gRPC status) finishes the call once, whether
// it comes from the model, from serve.request_timeout_ms, or from the drain.
#include "serve/grpc_endpoint.hpp"

#include "cli.hpp"
#include "serve/grpc_infer.hpp"
#include "serve/serve_app.hpp"

#include <encgraph/error.hpp>

#include <inference.grpc.pb.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <limits>

namespace encgraph::host::serve {

namespace asio = boost::asio;
using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;

class GrpcEndpoint::Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit Service(ServeApp& app) : app_(app) {}
  int64_t active() const { return active_; }

  ServerUnaryReactor* ServerLive(CallbackServerContext* context,
                                 const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    return answer(context, [&] { response->set_live(true); });
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* context,
                                  const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    return answer(context, [&] { response->set_ready(!app_.draining_); });
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* context,
                                 const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    return answer(context, [&] {
      need_model(request->name());
      response->set_ready(!app_.draining_);
    });
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* context,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    return answer(context, [&] {
      response->set_name("encgraph");
      response->set_version(version_string());
      if (!app_.options_.repository.empty()) response->add_extensions("model_repository");
    });
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* context,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    return answer(context, [&] {
      const auto service = need_model(request->name());
      response->set_name(request->name());
      response->add_versions("1");
      response->set_platform("encgraph_" + service->plugin_name());
      const auto tensor = [](auto* t, const std::string& name, const char* datatype,
                             std::initializer_list<int64_t> shape) {
        t->set_name(name);
        t->set_datatype(datatype);
        for (const int64_t d : shape) t->add_shape(d);
      };
      tensor(response->add_inputs(), kImagesInput, "BYTES", {-1});
      tensor(response->add_inputs(), kPixelsInput, "UINT8", {-1, -1, 3});
      if (service->takes_video()) {
        tensor(response->add_inputs(), kVideosInput, "BYTES", {-1});
        tensor(response->add_inputs(), kFramesInput, "UINT8", {-1, -1, -1, 3});
      }
      for (const OutputSpec& out : service->outputs()) {
        tensor(response->add_outputs(), out.name, "FP32", {-1, out.width});
        tensor(response->add_outputs(), out.name + kRowsSuffix, "INT64", {-1});
      }
    });
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* context,
                                      const inference::RepositoryIndexRequest*,
                                      inference::RepositoryIndexResponse* response) override {
    return answer(context, [&] {
      need_repository();
      std::lock_guard<std::mutex> lock(app_.models_mutex_);
      for (const auto& [name, service] : app_.models_) {
        auto* entry = response->add_models();
        entry->set_name(name);
        entry->set_version("1");
        entry->set_state("READY");
      }
    });
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    return on_pool(context, [this, model = request->model_name()] {
      need_repository();
      app_.load_model(model);
    });
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    return on_pool(context, [this, model = request->model_name()] {
      need_repository();
      app_.unload_model(model);
    });
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* context,
                                 const inference::ModelInferRequest* request,
                                 inference::ModelInferResponse* response) override;

 private:
  // Runs `fill` now and finishes the call with OK, or with the status of what it threw.
  template <class Fill>
  ServerUnaryReactor* answer(CallbackServerContext* context, Fill&& fill) {
    ServerUnaryReactor* reactor = context->DefaultReactor();
    try {
      fill();
      reactor->Finish(Status::OK);
    } catch (...) {
      reactor->Finish(grpc_error(std::current_exception()));
    }
    return reactor;
  }

  // As answer, on the app's pool: model loads take long. `work` must not
  // touch the request, which lives only as long as the call.
  template <class Work>
  ServerUnaryReactor* on_pool(CallbackServerContext* context, Work work) {
    ServerUnaryReactor* reactor = context->DefaultReactor();
    asio::post(app_.pool_, [reactor, work = std::move(work)] {
      try {
        work();
        reactor->Finish(Status::OK);
      } catch (...) {
        reactor->Finish(grpc_error(std::current_exception()));
      }
    });
    return reactor;
  }

  std::shared_ptr<ModelService> need_model(const std::string& model) {
    auto service = app_.find(model);
    if (!service) throw ProtocolError(404, "no model named '" + model + "' is loaded");
    return service;
  }

  void need_repository() const {
    if (app_.options_.repository.empty())
      throw ProtocolError(404, "the repository RPCs need `encgraph serve --model-repository DIR`");
  }

  ServeApp& app_;
  std::atomic<int64_t> active_{0};
};

ServerUnaryReactor* GrpcEndpoint::Service::ModelInfer(CallbackServerContext* context,
                                                      const inference::ModelInferRequest* request,
                                                      inference::ModelInferResponse* response) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  ++active_;
  const TimePoint start = app_.clock_.now();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto timer = std::make_shared<asio::steady_timer>(asio::make_strand(app_.io_));
  const std::string model = request->model_name();
  // Finishes the call once: the model's answer, an error, or the timeout,
  // whichever comes first; `filled` (on success) is swapped into the
  // response only by the winner, which is why it is built apart.
  auto finish = [this, reactor, response, answered, timer, start, model, peer = context->peer()](
                    int http_status, const Status& status, inference::ModelInferResponse* filled) {
    if (answered->exchange(true)) return;
    asio::post(timer->get_executor(), [timer] { timer->cancel(); });
    if (filled) response->Swap(filled);
    const double seconds = std::chrono::duration<double>(app_.clock_.now() - start).count();
    app_.metrics_.count_request(http_status, seconds);
    spdlog::info(
        "access remote={} method=grpc target=\"/inference.GRPCInferenceService/ModelInfer\" "
        "model=\"{}\" status={} grpc_status={} ms={:.3f}",
        peer, model, http_status, static_cast<int>(status.error_code()), seconds * 1e3);
    reactor->Finish(status);
    --active_;  // after Finish: the drain stops the server once this reaches 0
  };
  const auto fail = [finish](const std::exception_ptr& error) {
    const auto [status, message] = http_error(error);
    finish(status, Status(grpc_code(status), message), nullptr);
  };
  std::shared_ptr<ModelService> service;
  std::shared_ptr<InferRequest> parsed;
  try {
    if (app_.draining_)
      throw ProtocolError(503, "the server is shutting down; send the request elsewhere");
    service = need_model(model);
    // Parsed here, before the timeout can finish the call and free `request`.
    parsed = std::make_shared<InferRequest>(
        parse_grpc_infer_request(*request, service->outputs(), service->request_limits()));
  } catch (...) {
    fail(std::current_exception());
    return reactor;
  }
  const auto timeout = std::chrono::milliseconds(app_.options_.server.request_timeout_ms);
  asio::dispatch(timer->get_executor(), [this, timer, timeout, finish] {
    timer->expires_after(timeout);
    timer->async_wait([this, finish](boost::system::error_code ec) {
      if (ec) return;
      finish(504,
             Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                    "no answer within " + std::to_string(app_.options_.server.request_timeout_ms) +
                        " ms (serve.request_timeout_ms)"),
             nullptr);
    });
  });
  asio::post(app_.pool_, [this, service, parsed, finish, fail, model, start] {
    try {
      app_.submit(*service, *parsed,
                  [this, weak = std::weak_ptr<ModelService>(service), parsed, finish, fail, model,
                   start](std::vector<ItemPtr> items, std::exception_ptr error, bool cache_only) {
                    if (error) return fail(error);
                    // The model by a weak reference: this callback may be destroyed
                    // on the model's own worker, which must never drop its last one.
                    auto answer = [this, weak, parsed, finish, model, start, cache_only,
                                   items = std::move(items)]() mutable {
                      if (asks_f32(*parsed))
                        if (const auto service = weak.lock())
                          items = service->stored_in_f32(std::move(items));
                      inference::ModelInferResponse filled;
                      fill_grpc_infer_response(model, *parsed, items, filled);
                      if (cache_only)
                        app_.metrics_.count_cache_only_request(
                            std::chrono::duration<double>(app_.clock_.now() - start).count());
                      finish(200, Status::OK, &filled);
                    };
                    // Every image a cache hit: this is the pool thread inside
                    // submit, which answers at once. Otherwise this may be the
                    // model's worker, which goes on with the next batch.
                    if (cache_only)
                      answer();
                    else
                      asio::post(app_.pool_, std::move(answer));
                  });
    } catch (...) {
      fail(std::current_exception());
    }
  });
  return reactor;
}

struct GrpcEndpoint::Server {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool stopped = false;
};

GrpcEndpoint::GrpcEndpoint(ServeApp& app, const std::string& host, int64_t port)
    : service_(std::make_unique<Service>(app)), server_(std::make_unique<Server>()) {
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &server_->port);
  builder.RegisterService(service_.get());
  // A port another process holds is an error, as for HTTP, not shared.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(app.options_.server.max_body_bytes, std::numeric_limits<int>::max())));
  server_->server = builder.BuildAndStart();
  if (!server_->server || server_->port == 0)
    throw_config("cannot listen for gRPC on " + address +
                 " (the port is taken, or the host is not a local address); choose another "
                 "--grpc HOST:PORT (port 0 picks a free one)");
}

GrpcEndpoint::~GrpcEndpoint() {
  shutdown();
}

int GrpcEndpoint::port() const {
  return server_->port;
}

int64_t GrpcEndpoint::active_requests() const {
  return service_->active();
}

void GrpcEndpoint::shutdown() {
  if (!server_->server || server_->stopped) return;
  server_->stopped = true;
  server_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->server->Wait();
}

}  // namespace encgraph::host::serve
