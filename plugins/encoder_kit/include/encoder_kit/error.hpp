// The kit's one exception type: a message for the user plus the ABI status the
// plugin returns for it. It is the plugin SDK's (encgraph::sdk::Failure), so
// kit code, SDK code and the plugins throw and catch one type, and
// encoder_kit::guarded() (sdk::guard) turns it into an eg_status at the C
// boundary.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/error.hpp>

#include <string>

namespace encoder_kit {

using Error = encgraph::sdk::Failure;

[[noreturn]] inline void fail(eg_status status, const std::string& message) {
  encgraph::sdk::fail(status, message);
}

}  // namespace encoder_kit
