// The core's exception type: its keyed message and the throw helpers, defined
// once here rather than inline in every caller.
#include <encgraph/error.hpp>

namespace encgraph {

// Built by appends: GCC 12's -Wrestrict misfires on a chain of string +.
std::string Error::keyed_message(const std::string& key, int64_t index, const std::string& detail) {
  std::string out = key;
  if (index >= 0) out.append("[").append(std::to_string(index)).append("]");
  out.append(": ").append(detail);
  return out;
}

void throw_config(const std::string& m) {
  throw Error(ErrorKind::Config, m);
}

void throw_config_key(const std::string& key, int64_t index, const std::string& detail) {
  throw Error(ErrorKind::Config, key, index, detail);
}

void throw_plugin(const std::string& m) {
  throw Error(ErrorKind::Plugin, m);
}

}  // namespace encgraph
