// The encgraph subcommands; each takes its own arguments and returns an exit code
// (0 ok, 2 usage or configuration error, 1 any other failure).
#pragma once

#include <string>
#include <vector>

namespace encgraph::host {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int plugins_command(const std::vector<std::string>& args);

}  // namespace encgraph::host
