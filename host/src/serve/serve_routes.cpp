// The routes of ServeApp: which endpoint a request names, and the answers of
// the infer and repository endpoints (docs/serving.md, "Endpoints"). The
// server's life cycle (models, listening, timeouts, the drain) is serve_app.cpp.
#include "serve/serve_app.hpp"

#include "cli.hpp"
#include "serve/infer_protocol.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include <charconv>
#include <string_view>

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

}  // namespace

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
      return reply(make_response(request, 200,
                                 model_metadata_json(model, "encgraph_" + service->plugin_name(),
                                                     service->outputs(), service->takes_video())));
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
  if (action == "unload")
    unload_model(model);
  else
    load_model(model);
  reply(make_response(request, 200, "{}"));
}

void ServeApp::unload_model(const std::string& model) {
  if (draining_) throw ProtocolError(503, "the server is shutting down");
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
}

void ServeApp::load_model(const std::string& model) {
  if (draining_) throw ProtocolError(503, "the server is shutting down");
  // A reload replaces the model once the new one is ready.
  auto service = load(model);
  {
    std::lock_guard<std::mutex> lock(models_mutex_);
    std::swap(models_[model], service);
  }
  // `service` now holds the model replaced (if any): it finishes its queued
  // work here, outside the lock, so that other requests find their models.
  service.reset();
}

void ServeApp::infer(const std::string& model, HttpRequest& request, const Reply& reply) {
  if (draining_)
    throw ProtocolError(503, "the server is shutting down; send the request elsewhere");
  const auto service = find(model);
  if (!service) throw ProtocolError(404, "no model named '" + model + "' is loaded");
  const TimePoint start = clock_.now();  // the body in hand: what the server itself adds
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
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // Called on the model's worker thread (or a thread that hit the cache):
  // the response, a large JSON text at times, is written on the pool so that
  // the engine goes on with the next batch.
  submit(*service, *parsed,
         [this, weak = std::weak_ptr<ModelService>(service), parsed, model, reply, version,
          keep_alive,
          start](std::vector<ItemPtr> items, std::exception_ptr error, bool cache_only) {
           HttpRequest shape;
           shape.version(version);
           shape.keep_alive(keep_alive);
           if (error) {
             const auto [status, message] = http_error(error);
             return reply(make_response(shape, status, error_json(message)));
           }
           // The model by a weak reference: this callback may be destroyed on the
           // model's own worker, which must never drop its last reference.
           auto answer = [this, weak, parsed, model, reply, shape, start, cache_only,
                          items = std::move(items)]() mutable {
             if (asks_f32(*parsed))
               if (const auto service = weak.lock())
                 items = service->stored_in_f32(std::move(items));
             EncodedBody body = encode_infer_response(model, *parsed, items);
             HttpResponse response = make_response(
                 shape, 200, std::move(body.body),
                 body.header_length ? "application/octet-stream" : "application/json");
             if (body.header_length)
               response.set("Inference-Header-Content-Length", std::to_string(*body.header_length));
             if (cache_only)
               metrics_.count_cache_only_request(
                   std::chrono::duration<double>(clock_.now() - start).count());
             reply(std::move(response));
           };
           // Every image a cache hit: this is the request's own thread, inside
           // submit, so it answers at once. Otherwise this may be the model's
           // worker, which goes on with the next batch while the pool answers.
           if (cache_only)
             answer();
           else
             asio::post(pool_, std::move(answer));
         });
}

void ServeApp::submit(ModelService& service, InferRequest& parsed, ModelService::Done done) {
  std::vector<ServeInput> inputs;
  for (ImageInput& input : parsed.images) {
    if (input.video && !service.takes_video())
      throw ProtocolError(400, input.label + ": this model (plugin " + service.plugin_name() +
                                   ") takes no videos; send images");
    ServeInput in;
    in.label = input.label;
    in.video = input.video;
    if (input.encoded) {
      // A file sent before whose outputs are stored needs no decoding and no pixel hash.
      in.file_key = file_key(input.bytes, input.video);
      in.cached = service.find_file(*in.file_key);
      if (!in.cached && input.video)
        in.pixels = service.decode_video(input.bytes, input.label);
      else if (!in.cached)
        in.pixels = decode_image_bytes(input.bytes.data(), input.bytes.size(), input.label,
                                       service.max_pixels());
    } else {
      in.pixels.height = input.height;
      in.pixels.width = input.width;
      in.pixels.frames = input.frames;
      in.pixels.pixels = std::move(input.bytes);
    }
    input.bytes = {};  // decoded: the file's bytes are no longer needed
    inputs.push_back(std::move(in));
  }
  service.infer(next_request_++, std::move(inputs), std::move(done));
}
}  // namespace encgraph::host::serve
