// The wrapper every exported plugin function body runs in: no exception may
// cross the C boundary, so each is caught and becomes a status + message. It is
// the plugin SDK's guard (an encoder_kit::Error keeps its status; bad_alloc is
// out of memory; anything else internal).
#pragma once

#include <encoder_kit/error.hpp>

#include <encgraph/sdk/error.hpp>

#include <string>
#include <utility>

namespace encoder_kit {

inline void set_error(eg_error* err, const std::string& message) {
  encgraph::sdk::write_error(err, message.c_str());
}

template <class Fn>
eg_status guarded(eg_error* err, Fn&& fn) noexcept {
  return encgraph::sdk::guard(err, std::forward<Fn>(fn));
}

}  // namespace encoder_kit
