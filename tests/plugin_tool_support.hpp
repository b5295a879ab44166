// Command-line pieces the plugin tools share (tests/qwen2_5_vl/qwen_dump,
// tests/siglip/siglip_dump, bench/siglip/siglip_bench): the runtime options
// every tool takes, raw item files in, result rows out.
#pragma once

#include <encgraph/runtime.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace encgraph::tool {

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) parts.push_back(part);
  return parts;
}

// Applies `flag` when it is one of the runtime options every tool takes
// (--device D, --weights W, --set key=value, --budgets a,b, --max-items N) and
// returns whether it was. `value()` yields the flag's argument; `usage(why)`
// must not return (a --set without '=').
template <class Value, class Usage>
bool apply_runtime_option(const std::string& flag, Value&& value, Usage&& usage,
                          RuntimeConfig& rc) {
  if (flag == "--device") {
    rc.device = value();
  } else if (flag == "--weights") {
    rc.weights = value();
  } else if (flag == "--set") {
    const std::string kv = value();
    const auto eq = kv.find('=');
    if (eq == std::string::npos) usage("--set wants key=value");
    rc.plugin_config.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  } else if (flag == "--budgets") {
    for (const auto& b : split(value(), ',')) rc.budgets.token_budgets.push_back(std::stoll(b));
  } else if (flag == "--max-items") {
    rc.budgets.max_items_per_batch = std::stoll(value());
  } else {
    return false;
  }
  return true;
}

// Every byte of the file (none when it cannot be read).
inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Per item, in order: int64 rows, int64 cols, then rows x cols float32.
// Returns whether every write succeeded.
inline bool write_item_rows(const std::string& path, const Result& r, size_t count) {
  std::ofstream out(path, std::ios::binary);
  for (size_t i = 0; i < count; ++i) {
    const std::vector<float> rows = r.item_as_float(i);
    const int64_t shape[2] = {r.rows(i), r.hidden_size()};
    out.write(reinterpret_cast<const char*>(shape), sizeof(shape));
    out.write(reinterpret_cast<const char*>(rows.data()),
              static_cast<std::streamsize>(rows.size() * sizeof(float)));
  }
  return static_cast<bool>(out);
}

}  // namespace encgraph::tool
