#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/tuning_options.hpp>

#include "elf_check.hpp"
#include "plugin_probe.hpp"

#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <variant>

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

const char* host_tuning_option(void*, const char* key) {
  return tuning_option(key);
}

const eg_host_api kHostApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_host_api),
    /* .reserved = */ 0,
    /* .host_context = */ nullptr,
    /* .log = */ host_log,
    /* .item_desc_size = */ sizeof(eg_item_desc),
    /* .item_spec_size = */ sizeof(eg_item_spec),
    /* .tuning_option = */ host_tuning_option,
};

// One load at a time: the probe forks, and a second thread inside dlopen at
// that moment would leave the child a loader lock nobody releases. Loaded
// libraries are never closed (unloading code that registered CUDA kernels, or
// whose tables instances still point at, is unsafe): this cache maps each
// canonical file to its plugin, so a file is probed and loaded once a process.
std::mutex& loader_mutex() {
  static std::mutex m;
  return m;
}
std::map<fs::path, LoadedPlugin>& loaded_files() {
  static auto* loaded = new std::map<fs::path, LoadedPlugin>();
  return *loaded;
}

[[noreturn]] void reject(const fs::path& file, const std::string& reason) {
  throw Error(ErrorKind::Plugin, file.string() + ": " + reason);
}

const char* const kPrefix = "libencgraph_";
const char* const kSuffix = ".so";

bool valid_plugin_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

const char* const kNameRule = "use 1-64 characters of [A-Za-z0-9_.-], no path separators";

std::string file_name_for(const std::string& name) {
  return kPrefix + name + kSuffix;
}

}  // namespace

std::string table_problem(const TableFacts& t) {
  if (t.abi_major != EG_ABI_VERSION_MAJOR)
    return "built for plugin ABI " + std::to_string(t.abi_major) + "." +
           std::to_string(t.abi_minor) + " but this runtime speaks ABI " +
           std::to_string(EG_ABI_VERSION_MAJOR) + "." + std::to_string(EG_ABI_VERSION_MINOR) +
           "; rebuild the plugin against this runtime's plugin_api.h";
  if (t.struct_size < EG_PLUGIN_API_V1_0_SIZE)
    return "plugin table is " + std::to_string(t.struct_size) + " bytes, smaller than the " +
           std::to_string(EG_PLUGIN_API_V1_0_SIZE) +
           " bytes ABI 1.0 requires (a truncated or foreign table)";
  if (t.struct_size > kMaxTableSize)
    return "plugin table claims " + std::to_string(t.struct_size) + " bytes, more than the " +
           std::to_string(kMaxTableSize) +
           " any ABI 1.x table can have (a garbage size: does the entry return a valid "
           "eg_plugin_api with struct_size = sizeof(eg_plugin_api)?)";
  if (!t.unreadable.empty())
    return "the table's " + t.unreadable + " is not a string of at most " +
           std::to_string(kMaxTableString) +
           " bytes (an unterminated or garbage pointer); fix the plugin's table";
  if (!valid_plugin_name(t.name)) return "plugin name '" + t.name + "' is invalid: " + kNameRule;
  if (!t.null_functions.empty()) {
    if (t.null_functions.front() == "prepare_capture_inputs")
      return "prepare_capture_inputs and prepare_capture_staging are both NULL in the plugin "
             "table: provide prepare_capture_staging (1.1) or prepare_capture_inputs (see "
             "docs/plugin-abi.md)";
    return "required function '" + t.null_functions.front() +
           "' is NULL in the plugin table (ABI v1 requires it; see docs/plugin-abi.md)";
  }
  return {};
}

namespace {

// A file named libencgraph_X.so must declare X: plugin.name = X loads it by
// its file name alone, so any other declared name would be a lie.
std::string name_problem(const fs::path& file, const std::string& declared) {
  const std::optional<std::string> by_file = plugin_name_of_file(file);
  if (!by_file || *by_file == declared) return {};
  return "declares the plugin name '" + declared + "', but its file name stands for '" + *by_file +
         "' (plugin.name = \"" + *by_file + "\" loads " + file_name_for(*by_file) +
         "); rename the file to " + file_name_for(declared) + " or fix the name in its table";
}

std::string facts_problem(const fs::path& file, const TableFacts& t) {
  std::string problem = table_problem(t);
  return problem.empty() ? name_problem(file, t.name) : problem;
}

// What the plugin said in the probe process, said here.
void relay(const std::vector<ProbeLog>& logs) {
  for (const auto& log : logs)
    host_log(nullptr, log.level, log.plugin.c_str(), log.message.c_str());
}

// Loads `file` into this process after the checks; the caller holds loader_mutex().
LoadedPlugin load_locked(const fs::path& file) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(file, ec);
  if (ec) canonical = file;
  auto& loaded = loaded_files();
  if (auto it = loaded.find(canonical); it != loaded.end()) {
    // The same library may be reached under another file name (a link).
    if (std::string problem = name_problem(file, it->second.name); !problem.empty())
      reject(file, problem);
    LoadedPlugin copy = it->second;
    copy.file = file;
    return copy;
  }
  if (std::string problem = elf_problem(file); !problem.empty()) reject(file, problem);
  if (probe_enabled()) {
    const ProbeResult probe = probe_plugin(file, probe_timeout());
    std::string problem = probe.ok ? facts_problem(file, probe.table) : probe.problem;
    if (!problem.empty()) {
      relay(probe.logs);
      reject(file, problem);
    }
  }
  const EnteredPlugin entered = enter_plugin(file, &kHostApi);
  if (!entered.problem.empty()) reject(file, entered.problem);
  const TableFacts table = read_table(entered.api);
  if (std::string problem = facts_problem(file, table); !problem.empty()) {
    ::dlclose(entered.handle);
    reject(file, problem);
  }
  LoadedPlugin plugin;
  plugin.name = table.name;
  plugin.version = table.version;
  plugin.description = table.description;
  plugin.file = file;
  plugin.api = entered.api;
  plugin.abi_major = table.abi_major;
  plugin.abi_minor = table.abi_minor;
  loaded.emplace(canonical, plugin);
  return plugin;
}

PluginInfo info_of(const LoadedPlugin& p) {
  return {p.name,      p.version,   p.description,     p.file,
          p.abi_major, p.abi_minor, p.api->modalities, p.api->devices};
}

// What a listing says about one candidate: its identity, or why it is rejected.
// Nothing the file does can take this process down while probing is on.
std::variant<PluginInfo, std::string> inspect(const fs::path& file) {
  std::lock_guard<std::mutex> lock(loader_mutex());
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(file, ec);
  if (ec) canonical = file;
  if (auto it = loaded_files().find(canonical); it != loaded_files().end()) {
    if (std::string problem = name_problem(file, it->second.name); !problem.empty()) return problem;
    PluginInfo info = info_of(it->second);
    info.file = file;
    return info;
  }
  if (std::string problem = elf_problem(file); !problem.empty()) return problem;
  if (!probe_enabled()) {  // the user's choice: the file runs in this process
    try {
      return info_of(load_locked(file));
    } catch (const Error& e) {
      const std::string prefix = file.string() + ": ";
      const std::string m = e.what();
      return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
    }
  }
  const ProbeResult probe = probe_plugin(file, probe_timeout());
  relay(probe.logs);
  if (!probe.ok) return probe.problem;
  if (std::string problem = facts_problem(file, probe.table); !problem.empty()) return problem;
  const TableFacts& t = probe.table;
  return PluginInfo{t.name,      t.version,   t.description, file,
                    t.abi_major, t.abi_minor, t.modalities,  t.devices};
}

// Every entry named libencgraph_*.so on the path, as (name from the file name,
// file), directory by directory in search order, each sorted; a file reached
// through two directories naming the same place counts once. Nothing is opened.
std::vector<std::pair<std::string, fs::path>> candidates(const std::vector<fs::path>& path) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::set<fs::path> seen;
  for (const auto& dir : path) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (plugin_name_of_file(it->path())) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      fs::path canonical = fs::weakly_canonical(file, ec);
      if (ec) canonical = file;
      if (seen.insert(canonical).second) out.emplace_back(*plugin_name_of_file(file), file);
    }
  }
  return out;
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

std::optional<std::string> plugin_name_of_file(const fs::path& file) {
  const std::string f = file.filename().string();
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (f.size() < prefix + suffix || f.compare(0, prefix, kPrefix) != 0 ||
      f.compare(f.size() - suffix, suffix, kSuffix) != 0)
    return std::nullopt;
  return f.substr(prefix, f.size() - prefix - suffix);
}

LoadedPlugin load_plugin_file(const fs::path& file) {
  std::lock_guard<std::mutex> lock(loader_mutex());
  return load_locked(file);
}

PluginRegistry::PluginRegistry(const std::vector<fs::path>& configured_dirs)
    : search_path_(plugin_search_path(configured_dirs)) {}

std::optional<fs::path> PluginRegistry::find(const std::string& name) const {
  if (!valid_plugin_name(name)) return std::nullopt;
  for (const auto& dir : search_path_) {
    const fs::path file = dir / file_name_for(name);
    std::error_code ec;
    // Any kind of entry counts (a FIFO, a dangling link): the load names it.
    if (fs::symlink_status(file, ec).type() != fs::file_type::not_found && !ec) return file;
  }
  return std::nullopt;
}

const LoadedPlugin& PluginRegistry::get(const std::string& name) const {
  if (auto it = loaded_.find(name); it != loaded_.end()) return it->second;
  if (!valid_plugin_name(name))
    throw Error(ErrorKind::Config, "plugin name '" + name + "' is invalid: " + kNameRule +
                                       " (it names the file " + kPrefix + "<name>" + kSuffix + ")");
  const std::optional<fs::path> file = find(name);
  if (!file) {
    std::string msg = "plugin '" + name + "' not found: no " + file_name_for(name) +
                      " on the search path. Searched:";
    for (const auto& d : search_path_) {
      msg += ' ';  // appended, not "literal" + std::string: GCC 12 warns falsely
      msg += d.string();
    }
    std::vector<std::string> names;
    for (const auto& [n, f] : candidates(search_path_))
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    if (names.empty()) {
      msg += ". No plugin files (libencgraph_*.so) there";
    } else {
      msg += ". Available:";
      for (const auto& n : names) {
        msg += ' ';
        msg += n;
      }
    }
    msg += ". Add its directory with --plugin-dir or ENCGRAPH_PLUGIN_PATH.";
    throw Error(ErrorKind::Config, msg);  // a name nothing provides: fix the config
  }
  return loaded_.emplace(name, load_plugin_file(*file)).first->second;
}

PluginSurvey PluginRegistry::survey() const {
  PluginSurvey survey;
  std::map<std::string, fs::path> first_of_name;
  for (const auto& [name, file] : candidates(search_path_)) {
    if (!valid_plugin_name(name)) {
      survey.rejected.push_back({file, "its file name stands for the plugin name '" + name +
                                           "', which is invalid (" + kNameRule +
                                           "); rename or remove it"});
      continue;
    }
    if (auto [it, first] = first_of_name.emplace(name, file); !first) {
      survey.rejected.push_back({file, "duplicate plugin name '" + name +
                                           "': already provided by " + it->second.string() +
                                           " (earlier in the search path wins)"});
      continue;
    }
    auto result = inspect(file);
    if (auto* info = std::get_if<PluginInfo>(&result))
      survey.plugins.push_back(std::move(*info));
    else
      survey.rejected.push_back({file, std::get<std::string>(result)});
  }
  return survey;
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
