// What the config-driven subcommands share: parsing their arguments with
// Boost.Program_options (usage errors print the options and give exit code 2)
// and loading the config with --set overrides; engine_setup.hpp (the
// front-end library) makes the Engine.
#pragma once

#include "config.hpp"
#include "engine_setup.hpp"
#include "executor.hpp"

#include <boost/program_options.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph::host {

namespace po = boost::program_options;

// Adds --help, --config/-c FILE and --set KEY=VALUE (repeatable).
void add_config_options(po::options_description& opts, bool config_option = true);

// Parses `args`; on a usage error prints it with the options to stderr and
// returns the exit code to give back (2); with --help prints and returns 0.
// A command with a --config option must be given one, unless `config_optional`
// (serve, which takes --model-repository instead).
std::optional<int> parse_command_line(const std::string& command, const std::string& usage,
                                      const std::vector<std::string>& args,
                                      const po::options_description& opts,
                                      const po::positional_options_description* positional,
                                      po::variables_map& vm, bool config_optional = false);

// The config named by --config with the --set overrides (extra ones first),
// with the log level applied.
HostConfig load_command_config(const po::variables_map& vm,
                               const std::vector<std::string>& extra_overrides = {},
                               ConfigUse use = {});

}  // namespace encgraph::host
