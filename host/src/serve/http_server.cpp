#include "serve/http_server.hpp"

#include "serve/infer_protocol.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <chrono>
#include <optional>

namespace encgraph::host::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// An idle keep-alive connection, or a client sending too slowly, is closed
// after this long.
constexpr std::chrono::seconds kIdleTimeout{120};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpHandler& handler, uint64_t max_body_bytes,
          std::shared_ptr<HttpServer::State> state)
      : stream_(std::move(socket)),
        handler_(handler),
        max_body_bytes_(max_body_bytes),
        state_(std::move(state)) {
    beast::error_code ec;
    const auto endpoint = stream_.socket().remote_endpoint(ec);
    remote_ = ec ? "?" : endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(max_body_bytes_);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // curl sends "Expect: 100-continue" before a large body and waits a second
  // for the go-ahead: given at once, unless the header already failed.
  void on_header(beast::error_code ec) {
    if (ec) return on_read(ec);
    const auto expect = parser_->get().find(http::field::expect);
    if (expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue")) {
      auto go_ahead =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *go_ahead,
                        [self = shared_from_this(), go_ahead](beast::error_code e, size_t) {
                          if (e) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
      return close();
    if (ec) {
      // A body over the limit, or a request HTTP cannot parse: answered, then closed.
      HttpRequest request;
      request.version(11);
      const bool too_large = ec == http::error::body_limit;
      HttpResponse response = make_response(
          request, too_large ? 413 : 400,
          error_json(too_large ? "the request body is over " + std::to_string(max_body_bytes_) +
                                     " bytes (serve.max_body_bytes); send fewer or smaller images"
                               : "the request is not valid HTTP/1.1: " + ec.message()));
      response.keep_alive(false);
      ++state_->active;
      spdlog::info("access remote={} status={} error=\"{}\"", remote_, response.result_int(),
                   ec.message());
      return write(std::move(response));
    }
    ++state_->active;
    HttpRequest request = parser_->release();
    stream_.expires_never();  // the handler's own timeout bounds the answer
    auto self = shared_from_this();
    handler_(std::move(request), remote_, [self](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(response)]() mutable { self->write(std::move(r)); });
    });
  }

  void write(HttpResponse response) {
    response_ = std::make_shared<HttpResponse>(std::move(response));
    response_->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        --self->state_->active;
                        if (ec || !self->response_->keep_alive()) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const HttpHandler& handler_;
  uint64_t max_body_bytes_;
  std::shared_ptr<HttpServer::State> state_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpResponse> response_;
  std::string remote_;
};

}  // namespace

HttpServer::HttpServer(asio::io_context& io, const tcp::endpoint& endpoint, HttpHandler handler,
                       uint64_t max_body_bytes)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      handler_(std::move(handler)),
      max_body_bytes_(max_body_bytes),
      state_(std::make_shared<State>()) {
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(asio::socket_base::max_listen_connections);
}

HttpServer::~HttpServer() = default;

uint16_t HttpServer::port() const {
  return acceptor_.local_endpoint().port();
}

void HttpServer::start() {
  accept();
}

void HttpServer::accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec)
      std::make_shared<Session>(std::move(socket), handler_, max_body_bytes_, state_)->start();
    accept();
  });
}

void HttpServer::stop_accepting() {
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
}

HttpResponse make_response(const HttpRequest& request, int status, BodyParts body,
                           const std::string& content_type) {
  HttpResponse response{static_cast<http::status>(status), request.version()};
  response.set(http::field::server, "encgraph");
  response.set(http::field::content_type, content_type);
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  return response;
}

HttpResponse make_response(const HttpRequest& request, int status, std::string body,
                           const std::string& content_type) {
  BodyParts parts;
  parts.add(std::move(body));
  return make_response(request, status, std::move(parts), content_type);
}

}  // namespace encgraph::host::serve
