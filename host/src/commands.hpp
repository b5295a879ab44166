// The encgraph subcommands; each takes its own arguments and returns an exit code
// (0 ok, 2 bad usage, configuration or input, 1 any other failure). Errors other than
// usage errors are thrown as encgraph::Error and mapped by run_subcommand.
#pragma once

#include <string>
#include <vector>

namespace encgraph::host {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int plugins_command(const std::vector<std::string>& args);
int run_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
int encode_command(const std::vector<std::string>& args);
int check_config_command(const std::vector<std::string>& args);
int verify_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);

// Runs `command` with `args`, logging an escaping error and turning it into
// its exit code (Config and Input errors 2, others 1). Unknown commands give 2.
int run_subcommand(const std::string& command, const std::vector<std::string>& args);

// The top-level usage text.
const char* usage_text();

}  // namespace encgraph::host
