// The one exception type the core throws: a message meant for the user, naming
// what failed and how to fix it, plus a category the host maps to an exit code.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

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
  // A Config error about one setting: what() is "key: detail" ("key[i]: detail"
  // for element i of a list), and key(), index() and detail() keep the parts,
  // so that a front end (the TOML reader, Python) can add where it was set.
  Error(ErrorKind kind, std::string key, int64_t index, std::string detail)
      : std::runtime_error(keyed_message(key, index, detail)),
        kind_(kind),
        key_(std::move(key)),
        index_(index),
        detail_(std::move(detail)) {}
  ErrorKind kind() const noexcept { return kind_; }
  // "key: detail", or "key[i]: detail" for element i.
  static std::string keyed_message(const std::string& key, int64_t index,
                                   const std::string& detail);
  // The setting's dotted key ("budgets.token_budgets"), or empty.
  const std::string& key() const noexcept { return key_; }
  // The element of a list setting the error is about, or -1 for the whole key.
  int64_t index() const noexcept { return index_; }
  // The message without the key.
  const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorKind kind_;
  std::string key_;
  int64_t index_ = -1;
  std::string detail_;
};

[[noreturn]] void throw_config(const std::string& m);
// A Config error naming the setting `key` (element `index` of it, or -1).
[[noreturn]] void throw_config_key(const std::string& key, int64_t index,
                                   const std::string& detail);
[[noreturn]] void throw_plugin(const std::string& m);

}  // namespace encgraph
