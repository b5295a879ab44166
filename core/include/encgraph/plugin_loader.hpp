// Plugin discovery and ABI checks: finds libencgraph_*.so files, loads each with
// RTLD_NOW | RTLD_LOCAL, validates its table, and keeps it loaded for the life of
// the process (plugins may hold CUDA kernels, which must not be unloaded).
#pragma once

#include <encgraph/plugin_api.h>

#include <filesystem>
#include <memory>
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

struct RejectedPlugin {
  std::filesystem::path file;
  std::string reason;
};

// Directories searched, in order: those given, ENCGRAPH_PLUGIN_PATH (colon
// separated), the build tree's plugin folder, the install prefix's plugin folder.
std::vector<std::filesystem::path> plugin_search_path(
    const std::vector<std::filesystem::path>& configured_dirs);

// Loads and checks one file. Throws encgraph::Error (kind Plugin) naming the file
// and the reason when it is not a valid plugin for this runtime.
LoadedPlugin load_plugin_file(const std::filesystem::path& file);

class PluginRegistry {
 public:
  // Scans the search path. Bad files are kept in rejected() with their reason,
  // never thrown. The first plugin of a name wins; later ones are rejected as
  // duplicates naming both files.
  explicit PluginRegistry(const std::vector<std::filesystem::path>& configured_dirs = {});

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<RejectedPlugin>& rejected() const { return rejected_; }
  const std::vector<std::filesystem::path>& search_path() const { return search_path_; }

  // The plugin of this name; throws naming the searched directories and, if a
  // rejected file could have been it, that file's reason.
  const LoadedPlugin& get(const std::string& name) const;

 private:
  std::vector<std::filesystem::path> search_path_;
  std::vector<LoadedPlugin> plugins_;
  std::vector<RejectedPlugin> rejected_;
};

// Host services handed to every plugin (logging through spdlog).
const eg_host_api* host_services();

// Human-readable sets for listings: "image,video", "cpu,cuda".
std::string modality_names(uint32_t modalities);
std::string device_names(uint32_t devices);

}  // namespace encgraph
