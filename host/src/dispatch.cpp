#include "commands.hpp"
#include "job.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <new>
#include <stdexcept>

namespace encgraph::host {
namespace {

// What a failed allocation says instead of a bare "std::bad_alloc": which
// command ran out of memory and the settings that size what it holds.
void report_out_of_memory(const std::string& command, const std::string& detail) {
  const std::string message =
      "out of memory while running `encgraph " + command + "`" + detail +
      "; lower what the config asks for (workload.count, workload.request_size, workload.frames, "
      "the budgets in [budgets], or the bounds in [limits]) or free memory";
  try {
    spdlog::error("{}", message);
  } catch (...) {  // logging itself may need memory that is not there
    std::fputs("error: ", stderr);
    std::fputs(message.c_str(), stderr);
    std::fputs("\n", stderr);
  }
}

}  // namespace

const char* usage_text() {
  return "usage: encgraph <command> [options]\n"
         "commands:\n"
         "  run            capture the graphs, run the configured workload, report\n"
         "  bench          run the workload with graphs and eagerly, side by side\n"
         "  encode         encode image files or a trace (images, videos) into embeddings\n"
         "  check-config   validate a config without a GPU and without loading weights\n"
         "  verify         compare the graphs' outputs with every item run alone eagerly\n"
         "  serve          serve embeddings over HTTP (Open Inference Protocol)\n"
         "  plugins        list the plugins found and the rejected files\n"
         "options:\n"
         "  --version      print the version\n"
         "  --help         this help; `encgraph <command> --help` for a command's options\n"
         "exit codes: 0 ok, 2 bad usage, configuration or input, 1 any other error\n"
         "            (verify: 1 when an output differs)\n";
}

int run_subcommand(const std::string& command, const std::vector<std::string>& args) {
  try {
    int rc = -1;
    if (command == "run") rc = run_command(args);
    if (command == "bench") rc = bench_command(args);
    if (command == "encode") rc = encode_command(args);
    if (command == "check-config") rc = check_config_command(args);
    if (command == "verify") rc = verify_command(args);
    if (command == "plugins") rc = plugins_command(args);
    if (command == "serve") rc = serve_command(args);
    if (rc >= 0) {
      leave_job();
      return rc;
    }
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
    leave_job_after_failure(e);  // the other ranks of a job learn of it
    // Bad input (a setting, a file, an item) is the user's to fix: 2. A plugin,
    // device or internal failure: 1.
    return e.kind() == ErrorKind::Config || e.kind() == ErrorKind::Input ? kExitUsage
                                                                         : kExitFailure;
  } catch (const std::bad_alloc& e) {
    report_out_of_memory(command, "");
    leave_job_after_failure(e);
    return kExitFailure;
  } catch (const std::length_error& e) {
    // A container asked for more than it can hold: a size computed from input.
    report_out_of_memory(command, " (a size too large for memory: " + std::string(e.what()) + ")");
    leave_job_after_failure(e);
    return kExitFailure;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    leave_job_after_failure(e);
    return kExitFailure;
  }
  std::cerr << "encgraph: unknown command '" << command << "'\n" << usage_text();
  return kExitUsage;
}

}  // namespace encgraph::host
