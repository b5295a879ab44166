// encgraph: the command-line host. Dispatches to one subcommand.
#include "commands.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_api.h>

#include <spdlog/spdlog.h>

#include <iostream>

namespace {

constexpr const char* kUsage =
    "usage: encgraph <command> [options]\n"
    "commands:\n"
    "  plugins        list the plugins found and the rejected files\n"
    "options:\n"
    "  --version      print the version\n"
    "  --help         this help; `encgraph <command> --help` for a command's options\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace encgraph::host;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "encgraph " ENCGRAPH_VERSION " (plugin ABI " << EG_ABI_VERSION_MAJOR << "."
              << EG_ABI_VERSION_MINOR << ")\n";
    return kExitOk;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "plugins") return plugins_command(args);
  } catch (const encgraph::Error& e) {
    spdlog::error("{}", e.what());
    return e.kind() == encgraph::ErrorKind::Config ? kExitUsage : kExitFailure;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return kExitFailure;
  }
  std::cerr << "encgraph: unknown command '" << command << "'\n" << kUsage;
  return kExitUsage;
}
