#include <encgraph/error.hpp>
#include <encgraph/tuning_options.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>

namespace encgraph {
namespace {

constexpr int64_t kMaxCpuThreads = 1024;

std::mutex& options_mutex() {
  static std::mutex m;
  return m;
}
// Every value ever set, never freed: a plugin may hold a returned pointer.
std::deque<std::string>& interned_values() {
  static auto* values = new std::deque<std::string>();
  return *values;
}
std::map<std::string, const char*>& current_options() {
  static auto* options = new std::map<std::string, const char*>();
  return *options;
}

void check_option(const std::string& key, const std::string& value) {
  const std::string name = "plugin.tuning." + key;
  if (key == "cpu_threads") {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || n < 1 || n > kMaxCpuThreads)
      throw_config_key(name, -1,
                       "must be an integer in [1, " + std::to_string(kMaxCpuThreads) + "], got \"" +
                           value + "\"; leave it out for the CPUs this process may use");
  } else if (key == "cache_dir") {
    if (value.empty())
      throw_config_key(name, -1,
                       "is empty; give a folder, \"off\" (no cache), or leave it out for "
                       "$XDG_CACHE_HOME/encgraph (else ~/.cache/encgraph)");
  } else {
    std::string known;
    for (const TuningOptionSpec& spec : tuning_option_specs())
      known += (known.empty() ? "" : ", ") + std::string(spec.key);
    throw_config_key(name, -1, "is not a tuning option (known: " + known + ")");
  }
}

}  // namespace

const std::vector<TuningOptionSpec>& tuning_option_specs() {
  static const std::vector<TuningOptionSpec> specs = {
      {"cpu_threads", "threads of the CPU path's pool (default: the CPUs this process may use)"},
      {"cache_dir",
       "the GEMM tuning cache's folder, or \"off\" (default: $XDG_CACHE_HOME/encgraph, else "
       "~/.cache/encgraph)"},
  };
  return specs;
}

void check_tuning_options(const std::vector<std::pair<std::string, std::string>>& options) {
  for (const auto& [key, value] : options) check_option(key, value);
}

void set_tuning_options(const std::vector<std::pair<std::string, std::string>>& options) {
  check_tuning_options(options);
  std::lock_guard<std::mutex> lock(options_mutex());
  std::map<std::string, const char*>& current = current_options();
  current.clear();
  std::deque<std::string>& values = interned_values();
  for (const auto& [key, value] : options) {
    // A value set before is reused: runtimes made again and again stay bounded.
    auto it = std::find(values.begin(), values.end(), value);
    if (it == values.end()) it = values.insert(values.end(), value);
    current[key] = it->c_str();
  }
}

const char* tuning_option(const char* key) {
  if (key == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(options_mutex());
  const auto it = current_options().find(key);
  return it == current_options().end() ? nullptr : it->second;
}

}  // namespace encgraph
