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
#include <charconv>
#include <csignal>
#include <iostream>
#include <thread>

namespace encgraph::host::serve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

std::vector<std::string> split_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  size_t at = 0;
  while (at < target.size()) {
    const size_t slash = target.find('/', at);
    const size_t end = slash == std::string_view::npos ? target.size() : slash;
    if (end > at) parts.emplace_back(target.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

// A repository model name is a file stem: no path separators, no leading dot.
bool valid_model_name(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.size() <= 128 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

// An error's HTTP status: a protocol refusal carries its own; bad input 400;
// anything else is the server's fault.
std::pair<int, std::string> error_answer(const std::exception_ptr& error) {
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
      const auto [status, message] = error_answer(std::current_exception());
      answer(make_response(*shared, status, error_json(message)));
    }
  });
}

void ServeApp::route(HttpRequest& request, const Reply& reply) {
  std::vector<std::string> p =
      split_path(std::string_view(request.target().data(), request.target().size()));
  const bool get = request.method() == http::verb::get;
  const bool post = request.method() == http::verb::post;
  const auto need = [&](bool ok) {
    if (!ok)
      throw ProtocolError(405, "method " + std::string(request.method_string()) +
                                   " is not allowed on " + std::string(request.target()));
  };
  // /v2/models/{m}/versions/{v}/...: one version per model, so v is ignored.
  if (p.size() >= 5 && p[0] == "v2" && p[1] == "models" && p[3] == "versions")
    p.erase(p.begin() + 3, p.begin() + 5);
  if (p == std::vector<std::string>{"v2", "health", "live"}) {
    need(get);
    return reply(make_response(request, 200, "{\"live\":true}"));
  }
  if (p == std::vector<std::string>{"v2", "health", "ready"}) {
    need(get);
    const bool ready = !draining_;
    return reply(make_response(request, ready ? 200 : 503,
                               ready ? "{\"ready\":true}" : "{\"ready\":false}"));
  }
  if (p == std::vector<std::string>{"v2"}) {
    need(get);
    return reply(
        make_response(request, 200,
                      "{\"name\":\"encgraph\",\"version\":" + json_string(version_string()) +
                          ",\"extensions\":[\"binary_tensor_data\"" +
                          (options_.repository.empty() ? "" : ",\"model_repository\"") + "]}"));
  }
  if (p == std::vector<std::string>{"metrics"}) {
    need(get);
    return reply(make_response(request, 200, metrics_text(), "text/plain; version=0.0.4"));
  }
  if (p.size() >= 3 && p[0] == "v2" && p[1] == "models") {
    const std::string& model = p[2];
    if (p.size() == 4 && p[3] == "infer") {
      need(post);
      return infer(model, request, reply);
    }
    const auto service = find(model);
    if (!service && (p.size() == 3 || (p.size() == 4 && p[3] == "ready")))
      throw ProtocolError(404, "no model named '" + model + "' is loaded");
    if (p.size() == 3) {
      need(get);
      return reply(make_response(
          request, 200,
          model_metadata_json(model, "encgraph_" + service->plugin_name(), service->outputs())));
    }
    if (p.size() == 4 && p[3] == "ready") {
      need(get);
      return reply(make_response(request, draining_ ? 503 : 200,
                                 "{\"name\":" + json_string(model) +
                                     ",\"ready\":" + (draining_ ? "false" : "true") + "}"));
    }
  }
  if (p.size() >= 3 && p[0] == "v2" && p[1] == "repository") {
    if (options_.repository.empty())
      throw ProtocolError(404,
                          "the repository endpoints need `encgraph serve --model-repository DIR`");
    if (p.size() == 3 && p[2] == "index") {
      need(post);
      std::string index = "[";
      std::lock_guard<std::mutex> lock(models_mutex_);
      for (const auto& [name, service] : models_)
        index += (index.size() > 1 ? "," : "") + std::string("{\"name\":") + json_string(name) +
                 ",\"version\":\"1\",\"state\":\"READY\"}";
      return reply(make_response(request, 200, index + "]"));
    }
    if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
      need(post);
      return repository(p[3], p[4], request, reply);
    }
  }
  throw ProtocolError(404, "no endpoint " + std::string(request.target()) +
                               " (see docs/serving.md for the endpoints)");
}

void ServeApp::repository(const std::string& model, const std::string& action, HttpRequest& request,
                          const Reply& reply) {
  if (draining_) throw ProtocolError(503, "the server is shutting down");
  if (action == "unload") {
    std::shared_ptr<ModelService> gone;
    {
      std::lock_guard<std::mutex> lock(models_mutex_);
      const auto it = models_.find(model);
      if (it == models_.end()) throw ProtocolError(404, "no model named '" + model + "' is loaded");
      gone = std::move(it->second);
      models_.erase(it);
    }
    spdlog::info("model '{}' unloaded", model);
    // Requests already holding the service finish first; the last owner joins its worker.
    return reply(make_response(request, 200, "{}"));
  }
  // A reload replaces the model once the new one is ready.
  auto service = load(model);
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    models_[model] = std::move(service);
  }
  reply(make_response(request, 200, "{}"));
}

void ServeApp::infer(const std::string& model, HttpRequest& request, const Reply& reply) {
  if (draining_)
    throw ProtocolError(503, "the server is shutting down; send the request elsewhere");
  const auto service = find(model);
  if (!service) throw ProtocolError(404, "no model named '" + model + "' is loaded");
  std::optional<uint64_t> header_length;
  if (const auto field = request.find("Inference-Header-Content-Length"); field != request.end()) {
    const std::string text(field->value());
    uint64_t value = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size())
      throw ProtocolError(400, "Inference-Header-Content-Length is '" + text +
                                   "'; it must be the JSON header's length in bytes");
    header_length = value;
  }
  auto parsed = std::make_shared<InferRequest>(parse_infer_request(
      request.body(), header_length, service->outputs(), service->request_limits()));
  std::vector<DecodedImage> images;
  std::vector<std::string> labels;
  for (ImageInput& input : parsed->images) {
    if (input.encoded) {
      images.push_back(decode_image_bytes(input.bytes.data(), input.bytes.size(), input.label,
                                          service->max_pixels()));
    } else {
      DecodedImage image;
      image.height = input.height;
      image.width = input.width;
      image.pixels = std::move(input.bytes);
      images.push_back(std::move(image));
    }
    input.bytes = {};  // decoded: the file's bytes are no longer needed
    labels.push_back(input.label);
  }
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // Called on the model's worker thread (or a thread that hit the cache):
  // the response, a large JSON text at times, is written on the pool so that
  // the engine goes on with the next batch.
  service->infer(
      next_request_++, std::move(images), labels,
      [this, parsed, model, reply, version, keep_alive](std::vector<ItemPtr> items,
                                                        std::exception_ptr error) {
        HttpRequest shape;
        shape.version(version);
        shape.keep_alive(keep_alive);
        if (error) {
          const auto [status, message] = error_answer(error);
          return reply(make_response(shape, status, error_json(message)));
        }
        asio::post(pool_, [parsed, model, reply, shape, items = std::move(items)] {
          EncodedBody body = encode_infer_response(model, *parsed, items);
          HttpResponse response =
              make_response(shape, 200, std::move(body.body),
                            body.header_length ? "application/octet-stream" : "application/json");
          if (body.header_length)
            response.set("Inference-Header-Content-Length", std::to_string(*body.header_length));
          reply(std::move(response));
        });
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
  spdlog::info("draining: no new requests; answering the {} accepted", server_->active_requests());
  server_->stop_accepting();
  drain_timer_.emplace(io_);
  poll_drain();
}

void ServeApp::poll_drain() {
  // Polled rather than signalled: the count falls on any session's thread.
  if (server_->active_requests() == 0) return io_.stop();
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
  asio::signal_set signals(io_, SIGTERM, SIGINT);
  signals.async_wait([this](boost::system::error_code e, int signal) {
    if (e) return;
    spdlog::info("signal {} received", signal);
    drain();
  });
  server_->start();
  std::cout << "listening on http://" << options_.server.host << ":" << server_->port()
            << std::endl;
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < options_.server.threads; ++t) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (std::thread& t : threads) t.join();
  pool_.join();
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    models_.clear();  // each finishes what it has queued, then stops its worker
  }
  spdlog::info("stopped after answering every accepted request");
}

}  // namespace encgraph::host::serve
