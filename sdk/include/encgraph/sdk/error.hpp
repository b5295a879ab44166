// Errors across the C boundary: a typed sdk::Failure carries the eg_status a
// function returns, and sdk::guard() runs an exported body so that no exception
// ever crosses into the runtime (unwinding through C frames is undefined).
#pragma once

#include <encgraph/plugin_api.h>

#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

namespace encgraph::sdk {

// An error for the user plus the status that says whose problem it is
// (EG_ERR_INVALID_ARGUMENT: a bad config value or item; see docs/plugin-abi.md §4).
class Failure : public std::runtime_error {
 public:
  Failure(eg_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  eg_status status() const noexcept { return status_; }

 private:
  eg_status status_;
};

[[noreturn]] inline void fail(eg_status status, const std::string& message) {
  throw Failure(status, message);
}
// The user's mistake (config, weights, item): reported as an input error, exit 2.
[[noreturn]] inline void invalid(const std::string& message) {
  fail(EG_ERR_INVALID_ARGUMENT, message);
}

// Copies `message` into the caller's eg_error, truncated at a UTF-8 character
// boundary and always NUL-terminated. Never allocates, never throws.
inline void write_error(eg_error* err, const char* message) noexcept {
  if (!err) return;
  if (!message) message = "";
  const size_t cap = sizeof(err->message) - 1;
  size_t n = 0;
  while (n < cap && message[n] != '\0') ++n;
  if (message[n] != '\0')  // truncated: do not cut a multi-byte character in half
    while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xC0u) == 0x80u) --n;
  std::memcpy(err->message, message, n);
  err->message[n] = '\0';
}

namespace detail {
inline eg_status known_status(eg_status s) noexcept {
  // A Failure cannot report success, and an unknown value would confuse the runtime.
  return (s > EG_OK && s <= EG_ERR_INTERNAL) ? s : EG_ERR_INTERNAL;
}
}  // namespace detail

// Runs `fn()`; returns EG_OK, or the status of what it threw with the message
// in `err`: Failure -> its status, std::bad_alloc -> EG_ERR_OUT_OF_MEMORY,
// anything else -> EG_ERR_INTERNAL.
template <class Fn>
eg_status guard(eg_error* err, Fn&& fn) noexcept {
  try {
    fn();
    return EG_OK;
  } catch (const Failure& e) {
    write_error(err, e.what());
    return detail::known_status(e.status());
  } catch (const std::bad_alloc&) {
    write_error(err, "out of host memory (std::bad_alloc)");
    return EG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_error(err, e.what());
    return EG_ERR_INTERNAL;
  } catch (...) {
    write_error(err, "unknown exception (not derived from std::exception)");
    return EG_ERR_INTERNAL;
  }
}

}  // namespace encgraph::sdk
