#include "engine_setup.hpp"

#include <encgraph/data_parallel.hpp>
#include <encgraph/distributed_runtime.hpp>
#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#ifndef ENCGRAPH_VERSION
#define ENCGRAPH_VERSION "unknown"
#endif

namespace encgraph::host {

std::string version_string() {
  return std::string(ENCGRAPH_VERSION) + " (plugin ABI " + std::to_string(EG_ABI_VERSION_MAJOR) +
         "." + std::to_string(EG_ABI_VERSION_MINOR) + ")";
}

void apply_log_level(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

std::unique_ptr<Runtime> make_runtime(const RuntimeConfig& config) {
  try {
    return std::make_unique<Runtime>(config);
  } catch (const Error& e) {
    // At construction a plugin only sees its config and weights: an invalid
    // argument there is the config's fault.
    if (e.kind() == ErrorKind::Input)
      throw_config("[plugin.config] or plugin.weights rejected: " + std::string(e.what()));
    throw;
  }
}

std::unique_ptr<Engine> make_engine(const RuntimeConfig& config,
                                    const std::vector<std::string>& data_parallel,
                                    const std::shared_ptr<ProcessGroup>& job) {
  if (job) {
    if (!data_parallel.empty())
      throw_config(
          "runtime.data_parallel (one process driving several devices) cannot be "
          "combined with a multi-process launch (" +
          job->launcher() +
          "): drop runtime.data_parallel, each process takes the device of its local "
          "rank (runtime.device), or run alone with distributed.launch = \"off\"");
    try {
      return std::make_unique<DistributedRuntime>(config, job);
    } catch (const PeerFailure&) {
      throw;  // another rank's error, already announced by it
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Input)
        throw_config("[plugin.config] or plugin.weights rejected: " + std::string(e.what()));
      throw;
    }
  }
  if (data_parallel.empty()) return make_runtime(config);
  try {
    return std::make_unique<DataParallelRuntime>(config, data_parallel);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (e.kind() == ErrorKind::Input)
      throw_config("[plugin.config] or plugin.weights rejected: " + what);
    // DataParallelRuntime's own checks of the device list begin so.
    if (e.kind() == ErrorKind::Config && what.rfind("data parallel", 0) == 0)
      throw_config("runtime.data_parallel: " + what);
    throw;
  }
}

const char* device_type_name(eg_device_type type) {
  return type == EG_DEVICE_CUDA ? "cuda" : "cpu";
}

}  // namespace encgraph::host
