// Glob patterns (`*`, `?`, `[...]`) for the file lists of a workload: image
// files and a video's frame files.
#pragma once

#include <string>
#include <vector>

namespace encgraph::host {

// True when `s` holds a glob wildcard (otherwise it names one path).
bool has_glob_chars(const std::string& s);

// The paths matching `pattern`, sorted byte-wise (not by locale: the same order
// on every machine, so "0009.png" comes before "0010.png" but "9.png" after
// "10.png"); empty when nothing matches.
std::vector<std::string> glob_sorted(const std::string& pattern);

// What a pattern that matched nothing may have meant: "; '**' is not
// recursive here ..." for `**`, "; braces are not expanded ..." for `{a,b}`,
// else "". Appended to a "matches no file" message.
std::string glob_hint(const std::string& pattern);

// `path` with glob's special characters (* ? [ \) escaped, so that a folder
// named like "set[1]" can prefix a pattern.
std::string glob_escape(const std::string& path);

}  // namespace encgraph::host
