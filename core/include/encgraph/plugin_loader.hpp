// Plugin discovery and ABI checks. `plugin.name = X` loads exactly one file, the
// first libencgraph_X.so on the search path; nothing else on the path is opened.
// Before it is loaded into this process the file's ELF header is checked without
// running its code, and it is loaded once in a child process (the probe), so a
// library that crashes or hangs while loading costs an error, not the process.
// A loaded library stays loaded for the life of the process (plugins may hold
// CUDA kernels, which must not be unloaded).
#pragma once

#include <encgraph/plugin_api.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace encgraph {

struct LoadedPlugin {
  std::string name;
  std::string version;
  std::string description;
  std::filesystem::path file;
  const eg_plugin_api* api = nullptr;  // static table inside the library
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
};

// A valid plugin as a listing shows it: its table's identity, read in the probe
// process (the library is not loaded into this one).
struct PluginInfo {
  std::string name;
  std::string version;
  std::string description;
  std::filesystem::path file;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  uint32_t modalities = 0;  // bit set of eg_modality
  uint32_t devices = 0;     // bit set of eg_device_type
};

struct RejectedPlugin {
  std::filesystem::path file;
  std::string reason;
};

// Every libencgraph_*.so on the search path, each valid or rejected with its reason.
struct PluginSurvey {
  std::vector<PluginInfo> plugins;
  std::vector<RejectedPlugin> rejected;
};

// Directories searched, in order: those given, ENCGRAPH_PLUGIN_PATH (colon
// separated), the build tree's plugin folder, the install prefix's plugin folder.
std::vector<std::filesystem::path> plugin_search_path(
    const std::vector<std::filesystem::path>& configured_dirs);

// Checks, probes and loads one file. Throws encgraph::Error (kind Plugin) naming
// the file and the reason when it is not a valid plugin for this runtime,
// including a file named libencgraph_X.so whose table declares another name.
LoadedPlugin load_plugin_file(const std::filesystem::path& file);

// The plugin name a file name stands for ("libencgraph_toy.so" -> "toy"), or
// nullopt for a file not named like a plugin.
std::optional<std::string> plugin_name_of_file(const std::filesystem::path& file);

// One registry per thread: get() fills a cache. The files it loads are shared
// process-wide (load_plugin_file is thread-safe).
class PluginRegistry {
 public:
  // Builds the search path; opens no file.
  explicit PluginRegistry(const std::vector<std::filesystem::path>& configured_dirs = {});

  const std::vector<std::filesystem::path>& search_path() const { return search_path_; }

  // The file `name` maps to: the first <dir>/libencgraph_<name>.so on the search
  // path, whatever kind of file it is; nullopt when there is none (or the name
  // is not a valid plugin name).
  std::optional<std::filesystem::path> find(const std::string& name) const;

  // Loads the file `name` maps to (once per registry). Throws a Config error
  // naming the searched directories and the available names (from file names)
  // when no file maps to it, and the file's Plugin error when it is rejected.
  const LoadedPlugin& get(const std::string& name) const;

  // Inspects every candidate on the path, each in its own probe process (or by
  // the ELF check alone when that rejects it); never throws for a bad file. A
  // later file with an earlier file's name is listed as a rejected duplicate.
  PluginSurvey survey() const;

 private:
  std::vector<std::filesystem::path> search_path_;
  mutable std::map<std::string, LoadedPlugin> loaded_;
};

// Host services handed to every plugin (logging through spdlog).
const eg_host_api* host_services();

// Human-readable sets for listings: "image,video", "cpu,cuda".
std::string modality_names(uint32_t modalities);
std::string device_names(uint32_t devices);

}  // namespace encgraph
