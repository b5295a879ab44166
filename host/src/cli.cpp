#include "cli.hpp"

#include "commands.hpp"

#include <iostream>

namespace encgraph::host {

void add_config_options(po::options_description& opts, bool config_option) {
  opts.add_options()("help,h", "show this help");
  if (config_option)
    opts.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                       "the TOML config (required)");
  opts.add_options()("set,s",
                     po::value<std::vector<std::string>>()->composing()->value_name("KEY=VALUE"),
                     "override one config key, e.g. --set budgets.max_items_per_batch=8 "
                     "(repeatable; the value is one TOML value, else a plain string; quote "
                     "strings with special characters: --set 'key=\"text\"')");
}

std::optional<int> parse_command_line(const std::string& command, const std::string& usage,
                                      const std::vector<std::string>& args,
                                      const po::options_description& opts,
                                      const po::positional_options_description* positional,
                                      po::variables_map& vm, bool config_optional) {
  try {
    po::command_line_parser parser(args);
    parser.options(opts);
    // Without positional arguments of its own, a command refuses any.
    const po::positional_options_description none;
    parser.positional(positional ? *positional : none);
    po::store(parser.run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "encgraph " << command << ": " << e.what() << "\n" << usage << "\n" << opts;
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << usage << "\n" << opts;
    return kExitOk;
  }
  if (!config_optional && opts.find_nothrow("config", false) && !vm.count("config")) {
    std::cerr << "encgraph " << command << ": --config FILE is required\n" << usage << "\n" << opts;
    return kExitUsage;
  }
  return std::nullopt;
}

HostConfig load_command_config(const po::variables_map& vm,
                               const std::vector<std::string>& extra_overrides, ConfigUse use) {
  std::vector<std::string> overrides = extra_overrides;
  if (vm.count("set"))
    for (const auto& s : vm["set"].as<std::vector<std::string>>()) overrides.push_back(s);
  HostConfig config = load_config(vm["config"].as<std::string>(), overrides, use);
  apply_log_level(config.log_level);
  return config;
}

}  // namespace encgraph::host
