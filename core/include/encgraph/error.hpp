// The one exception type the core throws: a message meant for the user, naming
// what failed and how to fix it, plus a category the host maps to an exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace encgraph {

enum class ErrorKind {
  Config,   // bad configuration or usage: the user must change a setting
  Plugin,   // a plugin could not be loaded or failed a call
  Device,   // a CUDA (or other device) call failed, including out of memory
  Input,    // a bad item or file
  Internal  // a broken invariant of the core itself
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void throw_config(const std::string& m) {
  throw Error(ErrorKind::Config, m);
}
[[noreturn]] inline void throw_plugin(const std::string& m) {
  throw Error(ErrorKind::Plugin, m);
}

}  // namespace encgraph
