#include "plugin_dirs.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <system_error>

namespace encgraph::host {
namespace fs = std::filesystem;

namespace {

std::string what_it_is(const fs::file_status& s) {
  switch (s.type()) {
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    default: return "not a directory";
  }
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "; ") + l;
  return out;
}

}  // namespace

std::vector<std::string> plugin_dir_problems(const std::vector<fs::path>& dirs) {
  std::vector<std::string> out;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    const fs::file_status s = fs::status(dir, ec);
    // Appended, not "'" + ... : gcc 12 warns (-Wrestrict) on that form.
    std::string name = "'";
    name.append(dir.string()).append("'");
    if (s.type() == fs::file_type::directory) continue;
    if (s.type() == fs::file_type::not_found || s.type() == fs::file_type::none)
      out.push_back(name + " does not exist");
    else if (ec)
      out.push_back(name + " cannot be read (" + ec.message() + ")");
    else
      out.push_back(name + " is " + what_it_is(s) +
                    (s.type() == fs::file_type::regular ? ", not a directory" : ""));
  }
  return out;
}

void require_plugin_dirs(const HostConfig& config) {
  const std::vector<std::string> bad = plugin_dir_problems(config.runtime.plugin_dirs);
  if (bad.empty()) return;
  throw_config(config.source + ": runtime.plugin_dirs: " + joined(bad) +
               ": list folders that hold plugin libraries (or remove the entry)");
}

void warn_plugin_dirs(const HostConfig& config) {
  const std::vector<std::string> bad = plugin_dir_problems(config.runtime.plugin_dirs);
  if (!bad.empty())
    spdlog::warn("{}: runtime.plugin_dirs: {}: skipped (`encgraph check-config` refuses it)",
                 config.source, joined(bad));
}

}  // namespace encgraph::host
