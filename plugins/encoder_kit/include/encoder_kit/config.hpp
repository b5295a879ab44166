// Reading a plugin's flattened configuration (eg_create_params.config): typed
// getters with defaults, and a check that every key given was understood, so a
// misspelt key is an error naming the known ones rather than silently ignored.
#pragma once

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace encoder_kit {

class ConfigReader {
 public:
  ConfigReader(const eg_config_entry* entries, int64_t count, std::string plugin);

  const std::string& plugin() const { return plugin_; }

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::optional<std::string> get(const std::string& key);  // marks the key as understood
  std::string get_string(const std::string& key, const std::string& fallback);
  int64_t get_int(const std::string& key, int64_t fallback);
  double get_double(const std::string& key, double fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& fallback);
  // A list of names: the host renders a TOML array of strings as "[a, b]".
  std::vector<std::string> get_string_list(const std::string& key,
                                           const std::vector<std::string>& fallback);
  // A key with a fixed set of values: the index of its value in `names`
  // (names[0], the default, when absent). Throws Error(INVALID_ARGUMENT)
  // "<plugin>: <key> = "v" is not one of "a", "b", ..." otherwise.
  size_t get_choice(const std::string& key, const std::vector<std::string>& names);

  // Throws Error(INVALID_ARGUMENT) when a key was never asked for.
  void reject_unknown() const;

 private:
  std::string plugin_;
  std::map<std::string, std::string> values_;
  std::set<std::string> asked_;
};

// What a model plugin computes in: f32 on the CPU, bf16 on CUDA.
enum class ComputeDtype { F32, BF16 };

// The `dtype` key ("f32"/"float32", "bf16"/"bfloat16"; default by `device`).
// Throws Error(INVALID_ARGUMENT) when the device's path does not compute in it.
ComputeDtype read_compute_dtype(ConfigReader& reader, int32_t device);

// Throws Error(INVALID_ARGUMENT) "<plugin>: <name> must be positive, got <v>".
void require_positive(const std::string& plugin, const char* name, int64_t value);
// Throws Error(INVALID_ARGUMENT) "<plugin>: <name> = <v> is outside [lo, hi]".
// Plugins bound every size key so that the products they compute from them
// stay far inside 64 bits (and a typo is named, not allocated).
void require_in_range(const std::string& plugin, const char* name, int64_t value, int64_t lo,
                      int64_t hi);

// The [plugin.config] key check_finite (default true): whether a checkpoint's
// NaN or infinite weights are an error (see encoder_kit::WeightSource).
bool read_check_finite(ConfigReader& reader);

// Parsers shared with config.json readers; `what` names the setting in errors.
// parse_double refuses NaN and infinities.
int64_t parse_int(const std::string& what, const std::string& text);
double parse_double(const std::string& what, const std::string& text);
bool parse_bool(const std::string& what, const std::string& text);
// "[7, 15]" or "7,15" or "7" ("[]" is empty).
std::vector<int64_t> parse_int_list(const std::string& what, const std::string& text);
// "[a, b]", "a,b" or "a" (quotes around an element are dropped; "[]" is empty).
// An empty element ("[a, , b]") is an error naming `what`.
std::vector<std::string> parse_string_list(const std::string& what, const std::string& text);

}  // namespace encoder_kit
