#include "serve/serve_app.hpp"

#include "cli.hpp"
#include "serve/infer_protocol.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <iostream>
#include <thread>

namespace encgraph::host::serve {
namespace {

namespace asio = boost::asio;

// A repository model name is a file stem: no path separators, no leading dot.
bool valid_model_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.size() <= 128 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

}  // namespace

ServeApp::ServeApp(ServeOptions options)
    : options_(std::move(options)), pool_(static_cast<size_t>(options_.server.threads)) {}

ServeApp::~ServeApp() {
  pool_.join();
}

std::shared_ptr<ModelService> ServeApp::find(const std::string& model) {
  std::lock_guard<std::mutex> lock(models_mutex_);
  const auto it = models_.find(model);
  return it == models_.end() ? nullptr : it->second;
}

std::shared_ptr<ModelService> ServeApp::load(const std::string& model) {
  if (!valid_model_name(model))
    throw ProtocolError(400, "'" + model +
                                 "' is not a model name: names are the stems of the repository's "
                                 "TOML files (letters, digits, '_', '-', '.')");
  const std::filesystem::path file = options_.repository / (model + ".toml");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw ProtocolError(404, "the repository " + options_.repository.string() + " has no " +
                                 file.filename().string() + " for model '" + model + "'");
  const HostConfig config = load_config(file, options_.overrides);
  auto service = std::make_shared<ModelService>(model, config, metrics_, clock_);
  spdlog::info("model '{}' loaded from {} (plugin {})", model, file.string(),
               service->plugin_name());
  return service;
}

void ServeApp::handle(HttpRequest&& request, const std::string& remote, Reply reply) {
  const TimePoint start = clock_.now();
  auto shared = std::make_shared<HttpRequest>(std::move(request));
  const std::string method(shared->method_string());
  const std::string target(shared->target());
  const bool is_infer = target.find("/infer") != std::string::npos;
  const unsigned version = shared->version();
  const bool keep_alive = shared->keep_alive();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  auto timer = std::make_shared<asio::steady_timer>(asio::make_strand(io_));
  Reply answer = [this, answered, timer, start, method, target, remote, reply,
                  is_infer](HttpResponse response) {
    if (answered->exchange(true)) return;       // the timeout or the work answered first
    if (draining_) response.keep_alive(false);  // clients reconnect, to another server
    asio::post(timer->get_executor(), [timer] { timer->cancel(); });
    const double seconds = std::chrono::duration<double>(clock_.now() - start).count();
    if (is_infer) metrics_.count_request(response.result_int(), seconds);
    spdlog::info("access remote={} method={} target=\"{}\" status={} bytes={} ms={:.3f}", remote,
                 method, target, response.result_int(), response.body().size(), seconds * 1e3);
    reply(std::move(response));
  };
  const auto timeout = std::chrono::milliseconds(options_.server.request_timeout_ms);
  asio::dispatch(timer->get_executor(), [timer, timeout, answer, version, keep_alive, this] {
    timer->expires_after(timeout);
    timer->async_wait([answer, version, keep_alive, this](boost::system::error_code ec) {
      if (ec) return;
      HttpRequest shape;
      shape.version(version);
      shape.keep_alive(keep_alive);
      answer(make_response(
          shape, 504,
          error_json("no answer within " + std::to_string(options_.server.request_timeout_ms) +
                     " ms (serve.request_timeout_ms)")));
    });
  });
  asio::post(pool_, [this, shared, answer] {
    try {
      route(*shared, answer);
    } catch (...) {
      const auto [status, message] = http_error(std::current_exception());
      answer(make_response(*shared, status, error_json(message)));
    }
  });
}
std::string ServeApp::metrics_text() {
  std::vector<ServeMetrics::ModelCache> caches;
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    for (const auto& [name, service] : models_)
      caches.push_back({name, service->cache_stats(), service->cache_budget()});
  }
  return metrics_.render(caches);
}

void ServeApp::drain() {
  if (draining_.exchange(true)) return;
  spdlog::info("draining: no new requests; answering the {} accepted",
               server_->active_requests() + (grpc_ ? grpc_->active_requests() : 0));
  server_->stop_accepting();
  drain_timer_.emplace(io_);
  poll_drain();
}

void ServeApp::poll_drain() {
  // Polled rather than signalled: the counts fall on any connection's thread.
  if (server_->active_requests() == 0 && (!grpc_ || grpc_->active_requests() == 0))
    return io_.stop();
  drain_timer_->expires_after(std::chrono::milliseconds(10));
  drain_timer_->async_wait([this](boost::system::error_code ec) {
    if (!ec) poll_drain();
  });
}

void ServeApp::run() {
  if (options_.model) {
    const auto& [name, config] = *options_.model;
    models_[name] = std::make_shared<ModelService>(name, config, metrics_, clock_);
    spdlog::info("model '{}' loaded (plugin {})", name, models_[name]->plugin_name());
  } else {
    std::error_code ec;
    if (!std::filesystem::is_directory(options_.repository, ec))
      throw_config("--model-repository " + options_.repository.string() +
                   " is not a folder: name a folder of TOML configs (model name = file stem)");
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(options_.repository, ec))
      if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      try {
        models_[name] = load(name);
      } catch (const ProtocolError& e) {
        throw_config(e.what());
      }
    }
    if (names.empty())
      spdlog::warn(
          "the repository {} holds no *.toml config; load models later with POST "
          "/v2/repository/models/NAME/load",
          options_.repository.string());
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(options_.server.host, ec);
  if (ec)
    throw_config("serve.host '" + options_.server.host +
                 "' is not an IP address; give one such as 127.0.0.1 or 0.0.0.0");
  const asio::ip::tcp::endpoint endpoint(address,
                                         static_cast<unsigned short>(options_.server.port));
  try {
    server_ = std::make_unique<HttpServer>(
        io_, endpoint,
        [this](HttpRequest&& r, const std::string& remote, Reply reply) {
          handle(std::move(r), remote, std::move(reply));
        },
        static_cast<uint64_t>(options_.server.max_body_bytes));
  } catch (const boost::system::system_error& e) {
    throw_config("cannot listen on " + options_.server.host + ":" +
                 std::to_string(options_.server.port) + " (" + e.code().message() +
                 "); choose another serve.port (or --http HOST:PORT; port 0 picks a free one)");
  }
  if (options_.grpc_port >= 0)
    grpc_ = std::make_unique<GrpcEndpoint>(*this, options_.grpc_host, options_.grpc_port);
  asio::signal_set signals(io_, SIGTERM, SIGINT);
  signals.async_wait([this](boost::system::error_code e, int signal) {
    if (e) return;
    spdlog::info("signal {} received", signal);
    drain();
  });
  server_->start();
  std::cout << "listening on http://" << options_.server.host << ":" << server_->port()
            << std::endl;
  if (grpc_)
    std::cout << "listening on grpc://" << options_.grpc_host << ":" << grpc_->port() << std::endl;
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < options_.server.threads; ++t) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (std::thread& t : threads) t.join();
  if (grpc_) grpc_->shutdown();  // every accepted call is answered by now
  pool_.join();
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    models_.clear();  // each finishes what it has queued, then stops its worker
  }
  spdlog::info("stopped after answering every accepted request");
}

}  // namespace encgraph::host::serve
