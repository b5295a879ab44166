// The HTTP/1.1 transport of `encgraph serve` (Boost.Beast over Asio): accepts
// connections, reads one request at a time per connection within the body
// limit (413 past it), hands it to the handler, and writes the reply the
// handler gives from any thread. Counts the requests read and not yet
// answered, so that a drain can wait for them.
#pragma once

#include "serve/body_parts.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace encgraph::host::serve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
// Responses go out as byte ranges (body_parts.hpp): stored outputs uncopied.
using HttpResponse = boost::beast::http::response<PartsBody>;
using Reply = std::function<void(HttpResponse)>;
// `remote` is the client's address, for the access log.
using HttpHandler =
    std::function<void(HttpRequest&& request, const std::string& remote, Reply reply)>;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
             HttpHandler handler, uint64_t max_body_bytes);
  ~HttpServer();
  // The port bound (the one the OS chose for port 0).
  uint16_t port() const;
  void start();
  // Closes the listening socket: no new connection is accepted.
  void stop_accepting();
  // Requests read and not yet answered (their reply written or failed).
  int64_t active_requests() const { return state_->active; }

  struct State {
    std::atomic<int64_t> active{0};
  };

 private:
  void accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  HttpHandler handler_;
  uint64_t max_body_bytes_;
  std::shared_ptr<State> state_;
};

// A response with `status`, a body and its content type; keep-alive as the
// request asked.
HttpResponse make_response(const HttpRequest& request, int status, BodyParts body,
                           const std::string& content_type = "application/json");
HttpResponse make_response(const HttpRequest& request, int status, std::string body,
                           const std::string& content_type = "application/json");

}  // namespace encgraph::host::serve
