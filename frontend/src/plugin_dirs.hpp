// Checks of runtime.plugin_dirs. The plugin registry skips an entry that is
// not a directory, so a typo there would go unnoticed until the plugin is
// not found (or another copy of it is).
#pragma once

#include "config.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace encgraph::host {

// One line per entry that is not a directory (following links): "'/etc/passwd'
// is a regular file, not a directory", "'/x' does not exist". Empty: all are.
std::vector<std::string> plugin_dir_problems(const std::vector<std::filesystem::path>& dirs);

// check-config: throws a configuration error (exit code 2) naming every bad entry.
void require_plugin_dirs(const HostConfig& config);

// run, bench, encode: logs a warning naming every bad entry; the run goes on
// with the others (the registry skips these).
void warn_plugin_dirs(const HostConfig& config);

}  // namespace encgraph::host
