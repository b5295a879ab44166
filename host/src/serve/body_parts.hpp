// A response body as byte ranges in order, each kept alive by its owner: the
// JSON text, bytes converted for one answer, and stored outputs sent as the
// embedding cache holds them. Beast writes the ranges with one gather write,
// so an answer from the cache is never copied in user space.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace encgraph::host::serve {

struct BodyPart {
  std::shared_ptr<const void> owner;  // keeps [data, data + size) alive
  const void* data = nullptr;
  size_t size = 0;
};

struct BodyParts {
  std::vector<BodyPart> parts;

  // Appends `text` as a part of its own (moved into the owner).
  void add(std::string text);
  // Appends bytes that `owner` keeps alive, without copying them.
  void add(std::shared_ptr<const void> owner, const void* data, size_t size);
  size_t size() const;
  // The parts joined: for what needs one string (tests, logs).
  std::string text() const;
};

// A Beast Body over BodyParts (responses only: nothing reads into it).
struct PartsBody {
  using value_type = BodyParts;

  static std::uint64_t size(const value_type& body) { return body.size(); }

  class writer {
   public:
    using const_buffers_type = std::vector<boost::asio::const_buffer>;

    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>&, const value_type& body)
        : body_(body) {}

    void init(boost::system::error_code& ec) { ec = {}; }

    // Every part at once; Beast writes them with the header in one gather write.
    boost::optional<std::pair<const_buffers_type, bool>> get(boost::system::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      const_buffers_type buffers;
      buffers.reserve(body_.parts.size());
      for (const BodyPart& p : body_.parts)
        if (p.size > 0) buffers.emplace_back(p.data, p.size);
      if (buffers.empty()) return boost::none;
      return std::make_pair(std::move(buffers), false);
    }

   private:
    const value_type& body_;
    bool done_ = false;
  };
};

}  // namespace encgraph::host::serve
