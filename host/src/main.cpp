// encgraph: the command-line host. Dispatches to one subcommand; everything
// else lives in encgraph_cli_lib so the tests can drive it in-process.
#include "cli.hpp"
#include "commands.hpp"

#include <encgraph/blas_kernels.hpp>
#include <encgraph/malloc_tuning.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

int main(int argc, char** argv) {
  using namespace encgraph::host;
  // Before any thread exists (MPI, CUDA, the pools): setenv is not safe
  // against a concurrent getenv (blas_kernels.hpp).
  encgraph::choose_blas_kernels();
  // Items' rows reuse freed memory instead of fresh pages (malloc_tuning.hpp).
  encgraph::reuse_freed_memory();
  // Logs and progress go to stderr; stdout carries results (tables, --json).
  spdlog::set_default_logger(spdlog::stderr_color_mt("encgraph"));
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage_text();
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "encgraph " << version_string() << "\n";
    return kExitOk;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  return run_subcommand(command, args);
}
