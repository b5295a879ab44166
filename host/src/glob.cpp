#include "glob.hpp"

#include <glob.h>

#include <algorithm>

namespace encgraph::host {

bool has_glob_chars(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::string glob_hint(const std::string& pattern) {
  std::string hint;
  if (pattern.find("**") != std::string::npos)
    hint +=
        "; '**' is not recursive here: it matches names in one folder, like '*' (give one "
        "pattern per folder level)";
  if (pattern.find('{') != std::string::npos && pattern.find('}') != std::string::npos)
    hint += "; braces are not expanded ('{a,b}' is literal): give one pattern per alternative";
  return hint;
}

std::string glob_escape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '*' || c == '?' || c == '[' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> glob_sorted(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace encgraph::host
