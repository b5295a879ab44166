// Helpers over toml++ nodes: where a node was written, what type it is in words,
// the flattened key/value strings plugins receive, and `--set` overrides. Kept
// out of public headers: toml++ is only ever compiled in host .cpp files.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace encgraph::host {

// "file:line:column", or the --set argument a node came from.
std::string node_location(const toml::node& node, std::string_view fallback);
std::string source_location(const toml::source_region& source, std::string_view fallback);

// "a string", "an integer", "an array", ...
std::string_view node_type_phrase(const toml::node& node);

// A plugin.config value as text: strings raw, booleans true/false, arrays "[a, b]".
std::string render_plugin_value(const toml::node& node, std::string_view key_for_errors);

// Flattens a table into (key, value) pairs, nested keys joined by '.'.
void flatten_table(const toml::table& table, const std::string& prefix,
                   std::vector<std::pair<std::string, std::string>>& out);

// Applies one "key.path=value" override to `root`, changing that one key and
// nothing else. The key is a TOML key path; the value is parsed on its own as
// ONE TOML value when it is one (numbers, booleans, arrays, quoted strings),
// otherwise taken as a plain string. Refused: raw control characters (a
// newline could start a table header), invalid UTF-8, tables as values, and
// anything that would define a second key.
void apply_override(toml::table& root, std::string_view assignment);

// `text` for an error message: control characters (and every byte >= 0x80 when
// the text is not valid UTF-8) written as escapes, so that a hostile argument
// cannot forge lines of the output.
std::string printable(std::string_view text);

bool is_valid_utf8(std::string_view text);

// `text` cut to about `max` bytes (at a character boundary) with its full
// size noted, "abc... (5000 bytes)", so that a huge value or argument does not
// make a huge message; shorter text is returned as it is.
std::string abbreviated(std::string_view text, size_t max = 60);

// The most dots one dotted key or table header may hold. toml++ recurses once
// per nested table, so `a.a.a…` with tens of thousands of parts overflows the
// stack; no real config comes near this.
inline constexpr int kMaxKeyDepth = 64;

// Throws a Config error ("source:line:column: ...") when a key or table header
// in `text` nests deeper than kMaxKeyDepth. A lexical scan run before parsing:
// strings and comments are skipped, and a run of dots ends at = , [ ] { } or a
// newline (so floats in arrays count one each).
void check_key_depth(std::string_view text, std::string_view source_name);

// `text` as a TOML basic string (quoted and escaped).
std::string toml_quote(std::string_view text);

// Source path given to nodes made from an override, so that errors about them
// name the argument instead of a line.
inline constexpr std::string_view kOverridePrefix = "--set ";

}  // namespace encgraph::host
