// Tuning options for plugins ([plugin.tuning] in the host's config): values a
// plugin reads through the host table's tuning_option service (ABI 1.3)
// instead of the environment. Process-wide, like what they tune (the CPU
// thread pool, the tuning cache's folder).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace encgraph {

// The options a plugin may read, with what each means (docs/config.md).
struct TuningOptionSpec {
  const char* key;
  const char* meaning;
};
const std::vector<TuningOptionSpec>& tuning_option_specs();

// Throws the error set_tuning_options would for `options`, changing nothing.
void check_tuning_options(const std::vector<std::pair<std::string, std::string>>& options);

// Checks `options` (keys among tuning_option_specs(), values valid: cpu_threads
// an integer in [1, 1024], cache_dir a non-empty path or "off") and makes them
// the process's: a key not given is unset. Throws encgraph::Error (Config)
// naming "plugin.tuning.<key>", and then changes nothing.
void set_tuning_options(const std::vector<std::pair<std::string, std::string>>& options);

// The value of `key` set last, or nullptr. The pointer stays valid for the
// life of the process (values are never freed, so a plugin may keep it).
const char* tuning_option(const char* key);

}  // namespace encgraph
