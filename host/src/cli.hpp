// What the config-driven subcommands share: parsing their arguments with
// Boost.Program_options (usage errors print the options and give exit code 2),
// loading the config with --set overrides, the log level, and creating the
// Runtime (or data-parallel ranks) with configuration errors reported as such.
#pragma once

#include "config.hpp"
#include "executor.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/runtime.hpp>

#include <boost/program_options.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph::host {

namespace po = boost::program_options;

// The encgraph version and plugin ABI, e.g. "0.1.0 (plugin ABI 1.0)".
std::string version_string();

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

void apply_log_level(const std::string& level);

// A Runtime for `config`. A plugin rejecting its configuration is a
// configuration error (exit code 2), not a run failure.
std::unique_ptr<Runtime> make_runtime(const RuntimeConfig& config);

// One Runtime on config.device, or, when `data_parallel` lists devices, a
// DataParallelRuntime with one rank per device; configuration errors as in
// make_runtime, and the data-parallel ones name runtime.data_parallel.
std::unique_ptr<Engine> make_engine(const RuntimeConfig& config,
                                    const std::vector<std::string>& data_parallel);

// "cpu" or "cuda".
const char* device_type_name(eg_device_type type);
const char* dtype_name(int32_t dtype);

}  // namespace encgraph::host
