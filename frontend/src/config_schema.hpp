// Every key a config file may hold: its type, default and one-line meaning. The
// loader rejects keys not listed here (except inside [plugin.config], which is
// the plugin's own table), and docs/config.md documents each of them; a test
// keeps the two in step.
#pragma once

#include <string_view>
#include <vector>

namespace encgraph::host {

enum class KeyType {
  String,
  Integer,
  Float,  // an integer is accepted too
  Boolean,
  StringArray,
  IntegerArray,
  SizeArray,  // [[height, width], ...]
  Table,      // a free-form table (plugin.config)
};

struct KeySpec {
  std::string_view path;  // "section.key"
  KeyType type;
  std::string_view default_value;  // as written in docs/config.md
  std::string_view meaning;
};

const std::vector<KeySpec>& config_schema();
const KeySpec* find_key(std::string_view path);
// "a string", "an integer", ... for error messages.
std::string_view type_phrase(KeyType type);
// The top-level tables: runtime, plugin, budgets, workload, output, limits.
const std::vector<std::string_view>& config_sections();

}  // namespace encgraph::host
