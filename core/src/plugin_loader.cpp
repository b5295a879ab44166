#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>

#define BOOST_DLL_USE_STD_FS 1
#include <spdlog/spdlog.h>
#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace encgraph {
namespace {

void host_log(void*, int32_t level, const char* plugin, const char* message) {
  const char* who = plugin ? plugin : "plugin";
  const char* what = message ? message : "";
  switch (level) {
    case EG_LOG_TRACE: spdlog::trace("[{}] {}", who, what); break;
    case EG_LOG_DEBUG: spdlog::debug("[{}] {}", who, what); break;
    case EG_LOG_INFO: spdlog::info("[{}] {}", who, what); break;
    case EG_LOG_WARN: spdlog::warn("[{}] {}", who, what); break;
    default: spdlog::error("[{}] {}", who, what); break;
  }
}

const eg_host_api kHostApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_host_api),
    /* .reserved = */ 0,
    /* .host_context = */ nullptr,
    /* .log = */ host_log,
};

// Libraries stay loaded until exit: unloading code that registered CUDA kernels,
// or whose tables instances still point at, is unsafe.
std::vector<boost::dll::shared_library>& keep_alive() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}
std::mutex& keep_alive_mutex() {
  static std::mutex m;
  return m;
}

[[noreturn]] void reject(const fs::path& file, const std::string& reason) {
  throw Error(ErrorKind::Plugin, file.string() + ": " + reason);
}

bool has_elf_header(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' &&
         magic[3] == 'F';
}

bool valid_plugin_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// The functions every v1 plugin must provide, by name, for the error message.
void check_required_functions(const fs::path& file, const eg_plugin_api* api) {
  const std::pair<const char*, bool> required[] = {
      {"create", api->create != nullptr},
      {"destroy", api->destroy != nullptr},
      {"model_info", api->model_info != nullptr},
      {"budget_range", api->budget_range != nullptr},
      {"item_create", api->item_create != nullptr},
      {"item_destroy", api->item_destroy != nullptr},
      {"item_spec", api->item_spec != nullptr},
      {"buffer_shape", api->buffer_shape != nullptr},
      {"output_shape", api->output_shape != nullptr},
      {"workspace_size", api->workspace_size != nullptr},
      {"prepare_capture_inputs", api->prepare_capture_inputs != nullptr},
      {"prepare_replay_buffers", api->prepare_replay_buffers != nullptr},
      {"forward", api->forward != nullptr},
  };
  for (const auto& [fn, present] : required)
    if (!present)
      reject(file, std::string("required function '") + fn +
                       "' is NULL in the plugin table (ABI v1 requires it; see "
                       "docs/plugin-abi.md)");
}

}  // namespace

const eg_host_api* host_services() {
  return &kHostApi;
}

std::vector<fs::path> plugin_search_path(const std::vector<fs::path>& configured_dirs) {
  std::vector<fs::path> dirs(configured_dirs.begin(), configured_dirs.end());
  if (const char* env = std::getenv("ENCGRAPH_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs.emplace_back(item);
  }
  // Where this libencgraph.so really is decides between the build tree's
  // plugin folder and the installed one (<libdir>/encgraph/plugins, wherever the
  // install prefix put it).
  fs::path library_dir;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_search_path), &info) && info.dli_fname) {
    std::error_code ec;
    library_dir = fs::weakly_canonical(fs::path(info.dli_fname), ec).parent_path();
  }
#ifdef ENCGRAPH_BUILD_CORE_DIR
  {
    std::error_code ec;
    if (!library_dir.empty() &&
        library_dir == fs::weakly_canonical(fs::path(ENCGRAPH_BUILD_CORE_DIR), ec))
      dirs.emplace_back(ENCGRAPH_BUILD_PLUGIN_DIR);
  }
#endif
  if (!library_dir.empty()) dirs.push_back(library_dir / "encgraph" / "plugins");
#ifdef ENCGRAPH_INSTALL_PLUGIN_DIR
  if (std::find(dirs.begin(), dirs.end(), fs::path(ENCGRAPH_INSTALL_PLUGIN_DIR)) == dirs.end())
    dirs.emplace_back(ENCGRAPH_INSTALL_PLUGIN_DIR);
#endif
  return dirs;
}

LoadedPlugin load_plugin_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) reject(file, "not a regular file");
  // A library stays loaded for the process: a second scan reuses it instead of
  // opening another handle and calling its entry again.
  static std::map<fs::path, LoadedPlugin> loaded;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  {
    std::lock_guard<std::mutex> lock(keep_alive_mutex());
    auto it = loaded.find(canonical);
    if (it != loaded.end()) {
      LoadedPlugin copy = it->second;
      copy.file = file;
      return copy;
    }
  }
  if (!has_elf_header(file))
    reject(file,
           "not a shared library (no ELF header); remove it or rename it so it does "
           "not match libencgraph_*.so");

  boost::dll::shared_library library;
  try {
    library.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    reject(file, std::string("could not be loaded: ") + e.what());
  }
  if (!library.has(EG_PLUGIN_ENTRY_SYMBOL))
    reject(file, std::string("does not export the entry symbol '") + EG_PLUGIN_ENTRY_SYMBOL +
                     "' (build it with encgraph_add_plugin, see docs/writing-a-plugin.md)");

  auto entry = library.get<const eg_plugin_api*(const eg_host_api*)>(EG_PLUGIN_ENTRY_SYMBOL);
  const eg_plugin_api* api = nullptr;
  try {
    api = entry(&kHostApi);
  } catch (...) {
    reject(file,
           "its entry function threw an exception (an ABI violation: no exception may "
           "cross the C boundary)");
  }
  if (api == nullptr)
    reject(file,
           "its entry function returned no table (the plugin declined "
           "this runtime; its log says why)");
  if (api->abi_major != EG_ABI_VERSION_MAJOR)
    reject(file, "built for plugin ABI " + std::to_string(api->abi_major) + "." +
                     std::to_string(api->abi_minor) + " but this runtime speaks ABI " +
                     std::to_string(EG_ABI_VERSION_MAJOR) + "." +
                     std::to_string(EG_ABI_VERSION_MINOR) +
                     "; rebuild the plugin against "
                     "this runtime's plugin_api.h");
  if (api->struct_size < EG_PLUGIN_API_V1_0_SIZE)
    reject(file, "plugin table is " + std::to_string(api->struct_size) +
                     " bytes, smaller than the " + std::to_string(EG_PLUGIN_API_V1_0_SIZE) +
                     " bytes ABI 1.0 requires (a truncated or foreign table)");
  const std::string name = api->name ? api->name : "";
  if (!valid_plugin_name(name))
    reject(file, "plugin name '" + name +
                     "' is invalid: use 1-64 characters of [A-Za-z0-9_.-], no path separators");
  check_required_functions(file, api);

  LoadedPlugin plugin;
  plugin.name = name;
  plugin.version = api->version ? api->version : "";
  plugin.description = api->description ? api->description : "";
  plugin.file = file;
  plugin.api = api;
  plugin.abi_major = api->abi_major;
  plugin.abi_minor = api->abi_minor;
  {
    std::lock_guard<std::mutex> lock(keep_alive_mutex());
    keep_alive().push_back(std::move(library));
    loaded.emplace(canonical, plugin);
  }
  return plugin;
}

PluginRegistry::PluginRegistry(const std::vector<fs::path>& configured_dirs)
    : search_path_(plugin_search_path(configured_dirs)) {
  std::set<fs::path> seen_files;
  for (const auto& dir : search_path_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> candidates;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string fname = entry.path().filename().string();
      if (fname.rfind("libencgraph_", 0) == 0 && fname.size() > 3 &&
          fname.compare(fname.size() - 3, 3, ".so") == 0)
        candidates.push_back(entry.path());
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& file : candidates) {
      const fs::path canonical = fs::weakly_canonical(file, ec);
      if (!seen_files.insert(canonical).second) continue;  // same file via two dirs
      try {
        LoadedPlugin plugin = load_plugin_file(file);
        auto dup = std::find_if(plugins_.begin(), plugins_.end(),
                                [&](const LoadedPlugin& p) { return p.name == plugin.name; });
        if (dup != plugins_.end()) {
          rejected_.push_back({file, "duplicate plugin name '" + plugin.name +
                                         "': already provided by " + dup->file.string() +
                                         " (earlier in the search path wins)"});
          continue;
        }
        plugins_.push_back(std::move(plugin));
      } catch (const Error& e) {
        const std::string prefix = file.string() + ": ";
        std::string reason = e.what();
        if (reason.rfind(prefix, 0) == 0) reason = reason.substr(prefix.size());
        spdlog::warn("skipping plugin {}: {}", file.string(), reason);
        rejected_.push_back({file, reason});
      }
    }
  }
}

const LoadedPlugin& PluginRegistry::get(const std::string& name) const {
  for (const auto& p : plugins_)
    if (p.name == name) return p;
  std::string msg = "plugin '" + name + "' not found. Searched:";
  for (const auto& d : search_path_) msg += " " + d.string();
  const std::string expected = "libencgraph_" + name + ".so";
  bool rejected = false;
  for (const auto& r : rejected_)
    if (r.file.filename() == expected) {
      msg += ". " + r.file.string() + " was rejected: " + r.reason;
      rejected = true;
    }
  if (!plugins_.empty()) {
    msg += ". Available:";
    for (const auto& p : plugins_) msg += " " + p.name;
  }
  msg += ". Add its directory with --plugin-dir or ENCGRAPH_PLUGIN_PATH.";
  // A broken file is the plugin's fault; a name nothing provides is the config's.
  throw Error(rejected ? ErrorKind::Plugin : ErrorKind::Config, msg);
}

std::string modality_names(uint32_t m) {
  std::string s;
  if (m & EG_MODALITY_IMAGE) s += "image";
  if (m & EG_MODALITY_VIDEO) s += s.empty() ? "video" : ",video";
  return s.empty() ? "none" : s;
}

std::string device_names(uint32_t d) {
  std::string s;
  if (d & EG_DEVICE_CPU) s += "cpu";
  if (d & EG_DEVICE_CUDA) s += s.empty() ? "cuda" : ",cuda";
  return s.empty() ? "none" : s;
}

}  // namespace encgraph
