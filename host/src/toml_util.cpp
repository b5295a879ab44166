#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <charconv>
#include <sstream>

namespace encgraph::host {
namespace {

std::string format_float(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  // Keep the value recognisably floating for plugins that parse by type.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

namespace {

// Moves every entry of `from` into `into`; tables present on both sides merge,
// anything else is replaced.
void merge(toml::table& into, toml::table& from, const std::string& prefix,
           std::string_view assignment) {
  for (auto&& [key, node] : from) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    toml::node* existing = into.get(key.str());
    if (node.is_table() && existing && existing->is_table()) {
      merge(*existing->as_table(), *node.as_table(), path, assignment);
      continue;
    }
    if (node.is_table() && existing && !existing->is_table())
      throw_config(std::string(kOverridePrefix) + std::string(assignment) + ": '" + path + "' is " +
                   std::string(node_type_phrase(*existing)) + " in the config, not a table");
    node.visit([&](auto& concrete) { into.insert_or_assign(key.str(), std::move(concrete)); });
  }
}

}  // namespace

std::string node_location(const toml::node& node, std::string_view fallback) {
  return source_location(node.source(), fallback);
}

std::string source_location(const toml::source_region& src, std::string_view fallback) {
  if (!src.path) return std::string(fallback);
  const std::string& path = *src.path;
  if (path.rfind(kOverridePrefix, 0) == 0) return path;
  return path + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
}

std::string_view node_type_phrase(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string render_plugin_value(const toml::node& node, std::string_view key_for_errors) {
  if (auto s = node.as_string()) return s->get();
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) return format_float(f->get());
  if (auto b = node.as_boolean()) return b->get() ? "true" : "false";
  if (auto a = node.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size(); ++i) {
      if (i) out += ", ";
      out += render_plugin_value(*a->get(i), key_for_errors);
    }
    return out + "]";
  }
  if (node.is_table())
    throw_config(node_location(node, "config") + ": " + std::string(key_for_errors) +
                 ": tables inside arrays are not supported in [plugin.config]");
  std::ostringstream os;
  node.visit([&](const auto& v) { os << v; });
  return os.str();
}

void flatten_table(const toml::table& table, const std::string& prefix,
                   std::vector<std::pair<std::string, std::string>>& out) {
  for (auto&& [key, node] : table) {
    const std::string path =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* sub = node.as_table())
      flatten_table(*sub, path, out);
    else
      out.emplace_back(path, render_plugin_value(node, path));
  }
}

void apply_override(toml::table& root, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  const std::string source = std::string(kOverridePrefix) + std::string(assignment);
  if (eq == std::string_view::npos || eq == 0) throw_config(source + ": expected key.path=value");
  const std::string key(assignment.substr(0, eq));
  const std::string value(assignment.substr(eq + 1));
  // The key goes through the TOML parser too, so dotted and quoted keys mean
  // what they mean in a file.
  toml::table parsed;
  try {
    parsed = toml::parse(key + " = " + value, source);
  } catch (const toml::parse_error&) {
    try {
      parsed = toml::parse(key + " = " + toml_quote(value), source);
    } catch (const toml::parse_error& e) {
      throw_config(source + ": '" + key + "' is not a valid key path (" +
                   std::string(e.description()) + ")");
    }
  }
  merge(root, parsed, "", assignment);
}

}  // namespace encgraph::host
