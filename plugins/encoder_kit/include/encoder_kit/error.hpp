// The kit's one exception type: a message for the user plus the ABI status the
// plugin returns for it. Thrown anywhere in the kit and in plugins; turned into
// an eg_status by encoder_kit::guarded() at the C boundary.
#pragma once

#include <encgraph/plugin_api.h>

#include <stdexcept>
#include <string>

namespace encoder_kit {

class Error : public std::runtime_error {
 public:
  Error(eg_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  eg_status status() const noexcept { return status_; }

 private:
  eg_status status_;
};

[[noreturn]] inline void fail(eg_status status, const std::string& message) {
  throw Error(status, message);
}

}  // namespace encoder_kit
