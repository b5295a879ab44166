// `encgraph serve`: parses the command line into ServeOptions and runs the
// server until SIGTERM or SIGINT (docs/serving.md).
#include "cli.hpp"
#include "commands.hpp"
#include "plugin_dirs.hpp"
#include "serve/serve_app.hpp"

#include <encgraph/error.hpp>

#include <charconv>
#include <tuple>
#include <utility>

namespace encgraph::host {
namespace {

// "--http HOST:PORT" or "--grpc HOST:PORT" into a host and a port ("[::1]:8000" for IPv6).
std::pair<std::string, int64_t> parse_host_port(const std::string& option,
                                                const std::string& value) {
  const size_t colon = value.rfind(':');
  const auto bad = [&] {
    throw_config(option + " '" + value +
                 "' is not HOST:PORT; give e.g. 127.0.0.1:8000 (port 0 picks a free port)");
  };
  if (colon == std::string::npos || colon == 0) bad();
  std::string host = value.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port_text = value.substr(colon + 1);
  int64_t port = -1;
  const auto r = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || r.ec != std::errc() || r.ptr != port_text.data() + port_text.size() ||
      port < 0 || port > 65535)
    bad();
  return {host, port};
}

}  // namespace

int serve_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: encgraph serve (--config FILE | --model-repository DIR) [--http HOST:PORT] "
      "[--grpc HOST:PORT] [--set KEY=VALUE]...";
  po::options_description opts("encgraph serve options");
  add_config_options(opts, false);
  opts.add_options()("config,c", po::value<std::string>()->value_name("FILE"),
                     "serve the one model this config describes (its name: the file's stem)")(
      "model-repository", po::value<std::string>()->value_name("DIR"),
      "serve every DIR/*.toml (model name = file stem); load and unload them at run time")(
      "http", po::value<std::string>()->value_name("HOST:PORT"),
      "where to listen (overrides serve.host and serve.port; port 0 picks a free one)")(
      "grpc", po::value<std::string>()->value_name("HOST:PORT"),
      "also serve the protocol over gRPC there (port 0 picks a free one)");
  po::variables_map vm;
  if (auto rc = parse_command_line("serve", usage, args, opts, nullptr, vm, true)) return *rc;
  if (vm.count("config") == vm.count("model-repository"))
    throw_config("serve needs exactly one of --config FILE and --model-repository DIR\n" + usage);

  serve::ServeOptions options;
  if (vm.count("set")) options.overrides = vm["set"].as<std::vector<std::string>>();
  if (vm.count("config")) {
    HostConfig config = load_command_config(vm);
    warn_plugin_dirs(config);
    options.server = config.serve;
    const std::string name = std::filesystem::path(vm["config"].as<std::string>()).stem().string();
    options.model.emplace(name, std::move(config));
  } else {
    options.repository = vm["model-repository"].as<std::string>();
    // Server-wide keys come from the defaults and --set; each model's own
    // [serve] table sets its batching, cache and request limits.
    const HostConfig defaults =
        load_config_text("[plugin]\nname = \"none\"\n", "--set", options.overrides);
    apply_log_level(defaults.log_level);
    options.server = defaults.serve;
  }
  if (vm.count("http"))
    std::tie(options.server.host, options.server.port) =
        parse_host_port("--http", vm["http"].as<std::string>());
  if (vm.count("grpc"))
    std::tie(options.grpc_host, options.grpc_port) =
        parse_host_port("--grpc", vm["grpc"].as<std::string>());
  serve::ServeApp app(std::move(options));
  app.run();
  return kExitOk;
}

}  // namespace encgraph::host
