#include "toml_util.hpp"

#include <encgraph/error.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
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
      default:
        // Other control characters have no short escape; TOML allows none raw.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
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
      throw_config(std::string(kOverridePrefix) + abbreviated(printable(assignment), 100) + ": '" +
                   path + "' is " + std::string(node_type_phrase(*existing)) +
                   " in the config, not a table");
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
  // Plugins receive C strings and parse numbers: a NUL would cut the value
  // short, and inf/nan are no setting any plugin documents.
  if (auto s = node.as_string()) {
    if (s->get().find('\0') != std::string::npos)
      throw_config(node_location(node, "config") + ": plugin.config." +
                   std::string(key_for_errors) +
                   ": the string holds a NUL character (\\u0000); remove it");
    return s->get();
  }
  if (auto i = node.as_integer()) return std::to_string(i->get());
  if (auto f = node.as_floating_point()) {
    if (!std::isfinite(f->get()))
      throw_config(node_location(node, "config") + ": plugin.config." +
                   std::string(key_for_errors) + ": must be a finite number, got " +
                   format_float(f->get()));
    return format_float(f->get());
  }
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
    throw_config(node_location(node, "config") + ": plugin.config." + std::string(key_for_errors) +
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

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80)
      n = 0, cp = c;
    else if ((c & 0xE0) == 0xC0)
      n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      n = 3, cp = c & 0x07;
    else
      return false;
    if (i + n >= text.size() && n > 0) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string printable(std::string_view text) {
  const bool utf8 = is_valid_utf8(text);
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8)) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string abbreviated(std::string_view text, size_t max) {
  if (text.size() <= max + 20) return std::string(text);  // a cut must save something
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

void check_key_depth(std::string_view text, std::string_view source_name) {
  size_t line = 1, line_start = 0, run_start = 0;
  int dots = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '\'') {  // skip the string, basic or literal, one or three quotes
      const bool triple = text.compare(i, 3, std::string(3, c)) == 0;
      const std::string_view end =
          triple ? std::string_view(text.data() + i, 3) : text.substr(i, 1);
      size_t j = i + end.size();
      for (; j < text.size() && text.compare(j, end.size(), end) != 0; ++j) {
        if (c == '"' && text[j] == '\\') ++j;  // an escaped character
        if (j < text.size() && text[j] == '\n') ++line, line_start = j + 1;
      }
      // A multi-line string may end in up to two more quotes (""""a"""""), part of it.
      for (int extra = 0; triple && extra < 2 && j + 3 < text.size() && text[j + 3] == c; ++extra)
        ++j;
      i = std::min(j + end.size(), text.size()) - 1;
      continue;
    }
    if (c == '#') {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n' || c == '=' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}') {
      dots = 0;
      run_start = i + 1;
      if (c == '\n') ++line, line_start = i + 1;
      continue;
    }
    if (c == '.' && ++dots > kMaxKeyDepth)
      throw_config(std::string(source_name) + ":" + std::to_string(line) + ":" +
                   std::to_string(run_start - std::min(run_start, line_start) + 1) +
                   ": a dotted key or table header nests more than " +
                   std::to_string(kMaxKeyDepth) + " levels; no setting is that deep");
  }
}

namespace {

// A raw control character other than tab: TOML allows none of them outside
// strings but the newline, which is what would let a value start a table.
bool has_control_character(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7F;
  });
}

bool holds_table(const toml::node& node) {
  if (node.is_table()) return true;
  if (const toml::array* a = node.as_array())
    for (const auto& e : *a)
      if (holds_table(e)) return true;
  return false;
}

constexpr std::string_view kQuoteHint =
    "; a --set sets one value: a number, a boolean, an array such as [256, 512] or "
    "[\"cpu\", \"cpu\"], or a string, plain (--set runtime.device=cuda:1) or quoted with the "
    "shell's quotes around it (--set 'plugin.config.prompt=\"two\\nlines\"', TOML escapes "
    "inside the double quotes)";

}  // namespace

void apply_override(toml::table& root, std::string_view assignment) {
  // Messages name the argument; a huge one is shown cut short.
  const std::string source = std::string(kOverridePrefix) + abbreviated(printable(assignment), 100);
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) throw_config(source + ": expected key.path=value");
  const std::string key(assignment.substr(0, eq));
  const std::string value(assignment.substr(eq + 1));
  if (!is_valid_utf8(assignment))
    throw_config(source + ": is not valid UTF-8; keys and values must be UTF-8 text" +
                 std::string(kQuoteHint));
  if (has_control_character(key))
    throw_config(source + ": the key '" + printable(key) +
                 "' holds a control character; name one key path, e.g. budgets.token_step");
  if (has_control_character(value))
    throw_config(source +
                 ": the value holds a raw control character (a newline, carriage return, ...), "
                 "which could start another key or table; write it as an escape inside a "
                 "quoted string" +
                 std::string(kQuoteHint));

  // The key on its own: a TOML key path (dotted and quoted keys mean what they
  // mean in a file) naming exactly one key.
  check_key_depth(key, source);
  toml::table key_doc;
  try {
    key_doc = toml::parse(key + " = 0", source);
  } catch (const toml::parse_error& e) {
    throw_config(source + ": '" + printable(key) + "' is not a valid key path (" +
                 std::string(e.description()) + ")");
  }
  for (const toml::node* n = &key_doc; !n->is_integer();) {
    const toml::table* t = n->as_table();
    if (!t || t->size() != 1)
      throw_config(source + ": '" + printable(key) + "' must name exactly one key");
    n = &t->cbegin()->second;
  }

  // The value on its own, in a document of its own: exactly the key v.
  std::string value_text = value;
  toml::table value_doc;
  try {
    value_doc = toml::parse("v = " + value_text, source);
  } catch (const toml::parse_error&) {
    // Not a TOML value: the text itself is the string (--set plugin.weights=/x).
    value_text = toml_quote(value);
    try {
      value_doc = toml::parse("v = " + value_text, source);
    } catch (const toml::parse_error& e) {
      throw_config(source + ": the value is neither a TOML value nor a plain string (" +
                   std::string(e.description()) + ")" + std::string(kQuoteHint));
    }
  }
  const toml::node* v = value_doc.get("v");
  if (value_doc.size() != 1 || !v)
    throw_config(source + ": the value must be one TOML value, not several keys" +
                 std::string(kQuoteHint));
  if (holds_table(*v))
    throw_config(source +
                 ": the value is a table; a --set changes one key, so set each key of "
                 "it on its own (--set " +
                 printable(key) + ".name=value)");

  toml::table parsed;
  try {
    parsed = toml::parse(key + " = " + value_text, source);
  } catch (const toml::parse_error& e) {
    throw_config(source + ": " + std::string(e.description()) + std::string(kQuoteHint));
  }
  merge(root, parsed, "", assignment);
}

}  // namespace encgraph::host
