// The files a command reads and writes, and the checks made on them before
// any work, so that a bad output path costs seconds, not a run: every output
// absent or a regular file in a writable folder, and none of them one of the
// inputs or another output.
#pragma once

#include "config.hpp"
#include "output_files.hpp"
#include "workload.hpp"

#include <vector>

namespace encgraph::host {

// What the command reads: the config file, the plugin's weights and every
// [plugin.config] value naming an existing file or folder (config_json, ...),
// the trace, and every image and frame file of the workload.
std::vector<NamedFile> command_inputs(const HostConfig& config, const std::vector<WorkItem>& work);

// The outputs config.output names (empty ones left out).
std::vector<NamedFile> command_outputs(const HostConfig& config);

// check_output_target for each output: cheap, so done before the workload is
// read.
void check_output_targets(const HostConfig& config);

// No output is an input or another output (check_outputs_distinct).
void check_outputs_against_inputs(const HostConfig& config, const std::vector<WorkItem>& work);

}  // namespace encgraph::host
