#include "command_outputs.hpp"

#include <encgraph/error.hpp>

#include <encgraph/plugin_loader.hpp>

#include <sys/stat.h>

#include <filesystem>

namespace encgraph::host {

std::vector<NamedFile> command_inputs(const HostConfig& config, const std::vector<WorkItem>& work) {
  std::vector<NamedFile> inputs;
  if (!config.source.empty()) inputs.push_back({"config", config.source});
  const auto exists = [](const std::string& p) {
    struct stat st {};
    return !p.empty() && ::stat(p.c_str(), &st) == 0;
  };
  const RuntimeConfig& rt = config.runtime;
  // The code that runs: an output over the plugin's library or this program
  // would replace them with embeddings. Finding the plugin's file opens nothing.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) inputs.push_back({"encgraph program", self});
  try {
    if (const auto library = PluginRegistry(rt.plugin_dirs).find(rt.plugin))
      inputs.push_back({"plugin library (plugin.name = \"" + rt.plugin + "\")", *library});
  } catch (const Error&) {
    // A bad plugin name or search path is reported when the plugin is loaded.
  }
  if (exists(rt.weights)) inputs.push_back({"weights (plugin.weights)", rt.weights});
  // A plugin reads its settings as it likes; any value naming an existing
  // file or folder may be read, so none of them may be overwritten.
  for (const auto& [key, value] : rt.plugin_config)
    if (exists(value)) inputs.push_back({"file named by plugin.config." + key, value});
  if (config.workload.kind == "trace" && !config.workload.trace.empty())
    inputs.push_back({"trace", config.workload.trace});
  for (const WorkItem& w : work) {
    if (!w.file.empty()) inputs.push_back({"image", w.file});
    if (!w.video_file.empty()) inputs.push_back({"video", w.video_file});
    for (const auto& f : w.frame_files) inputs.push_back({"frame of video '" + w.id + "'", f});
  }
  return inputs;
}

std::vector<NamedFile> command_outputs(const HostConfig& config) {
  std::vector<NamedFile> outputs;
  if (!config.output.embeddings.empty())
    outputs.push_back({"embeddings output", config.output.embeddings});
  if (!config.output.report.empty()) outputs.push_back({"report", config.output.report});
  return outputs;
}

void check_output_targets(const HostConfig& config) {
  for (const auto& o : command_outputs(config)) check_output_target(o);
}

void check_outputs_against_inputs(const HostConfig& config, const std::vector<WorkItem>& work) {
  check_outputs_distinct(command_outputs(config), command_inputs(config, work));
}

}  // namespace encgraph::host
