// What every front end (the encgraph command, the Python module) does to start
// an Engine from a config: the log level, the Engine itself with a plugin's
// rejection reported as a configuration error, and the names it shows for the
// version, device types and dtypes.
#pragma once

#include <encgraph/plugin_api.h>
#include <encgraph/engine.hpp>
#include <encgraph/output_spec.hpp>
#include <encgraph/process_group.hpp>
#include <encgraph/runtime.hpp>
#include <encgraph/runtime_config.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace encgraph::host {

// The encgraph version and plugin ABI, e.g. "0.1.0 (plugin ABI 1.0)".
std::string version_string();

void apply_log_level(const std::string& level);

// A Runtime for `config`. A plugin rejecting its configuration is a
// configuration error (exit code 2), not a run failure.
std::unique_ptr<Runtime> make_runtime(const RuntimeConfig& config);

// One Runtime on config.device, or, when `data_parallel` lists devices, a
// DataParallelRuntime with one rank per device, or, when this process belongs
// to a multi-process `job` (the CLI's join_job), a DistributedRuntime over it;
// configuration errors as in make_runtime, and the data-parallel ones name
// runtime.data_parallel.
std::unique_ptr<Engine> make_engine(const RuntimeConfig& config,
                                    const std::vector<std::string>& data_parallel,
                                    const std::shared_ptr<ProcessGroup>& job = nullptr);

// "cpu" or "cuda".
const char* device_type_name(eg_device_type type);

}  // namespace encgraph::host
