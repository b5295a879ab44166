// A typed reader over the plugin's flattened configuration (eg_config_entry:
// its [plugin.config] table as key/value strings, nested keys joined by '.',
// arrays as "[a, b]"). Every key read becomes known; reject_unknown() then
// refuses any other key, suggesting the nearest known one ("did you mean").
//
//   sdk::Config cfg(params->config, params->num_config, "minimal");
//   const double scale = cfg.get<double>("scale", 1.0, {0.0, 100.0});
//   const auto layers = cfg.get<std::vector<int64_t>>("layers", {}, {0, 31});
//   const std::string mode = cfg.require<std::string>("mode");
//   cfg.reject_unknown();  // sdk::entry<> calls it after the model's constructor
#pragma once

#include <encgraph/sdk/error.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace encgraph::sdk {

// Inclusive bounds of a number (of each element, for a list).
template <class T>
struct Bounds {
  T lo = std::numeric_limits<T>::lowest();
  T hi = std::numeric_limits<T>::max();
};

namespace detail {

template <class T>
struct ConfigValue {  // scalars: the element is the value itself
  using element = T;
};
template <class T>
struct ConfigValue<std::vector<T>> {
  using element = T;
};

template <class T>
std::string show(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return "'" + v + "'";
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    std::ostringstream os;
    os << v;
    return os.str();
  }
}

inline std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Levenshtein distance, case-insensitive: how far a typo is from a known key.
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace detail

// The closest of `known` to `key`, when close enough to be a likely typo.
inline std::optional<std::string> nearest_key(const std::string& key,
                                              const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const std::string& k : known) {
    const size_t d = detail::edit_distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

class Config {
 public:
  // `plugin` prefixes every message. Duplicate keys are an error.
  Config(const eg_config_entry* entries, int64_t count, std::string plugin)
      : plugin_(std::move(plugin)) {
    for (int64_t i = 0; entries && i < count; ++i) {
      if (!entries[i].key) continue;
      const std::string key = entries[i].key;
      const std::string value = entries[i].value ? entries[i].value : "";
      if (!values_.emplace(key, value).second) invalid(where(key) + " is given twice; keep one");
      order_.push_back(key);
    }
  }

  const std::string& plugin() const { return plugin_; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }

  // The key's value, or `fallback` when it is absent; the key becomes known.
  // T: int64_t, int32_t, double, float, bool, std::string, or a std::vector of these.
  template <class T>
  T get(const std::string& key, T fallback,
        Bounds<typename detail::ConfigValue<T>::element> bounds = {}) {
    known(key);
    const auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    return parse_checked<T>(key, it->second, bounds);
  }

  // The key's value, or nullopt when it is absent; the key becomes known.
  template <class T>
  std::optional<T> get_optional(const std::string& key,
                                Bounds<typename detail::ConfigValue<T>::element> bounds = {}) {
    known(key);
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return parse_checked<T>(key, it->second, bounds);
  }

  // A key without which the plugin cannot work.
  template <class T>
  T require(const std::string& key, Bounds<typename detail::ConfigValue<T>::element> bounds = {}) {
    known(key);
    const auto it = values_.find(key);
    if (it == values_.end())
      invalid(plugin_ + ": [plugin.config] needs the key '" + key + "'; add " + key +
              " = ... to the plugin's table");
    return parse_checked<T>(key, it->second, bounds);
  }

  // A string that must be one of `choices`.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices) {
    const std::string v = get<std::string>(key, fallback);
    if (std::find(choices.begin(), choices.end(), v) == choices.end())
      invalid(where(key) + " = '" + v + "' is not one of " + list(choices));
    return v;
  }

  // Declares a key as understood without reading it here.
  void known(const std::string& key) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  }
  const std::vector<std::string>& known_keys() const { return known_; }

  // Throws Failure(EG_ERR_INVALID_ARGUMENT) for the first key never read or
  // declared: "unknown config key 'scael' (did you mean 'scale'?); known keys: scale".
  void reject_unknown() const {
    for (const std::string& key : order_) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string m = plugin_ + ": unknown config key '" + key + "' in [plugin.config]";
      if (auto near = nearest_key(key, known_)) m += " (did you mean '" + *near + "'?)";
      m += known_.empty() ? "; this plugin takes no keys" : "; known keys: " + list(known_);
      invalid(m);
    }
  }

 private:
  std::string where(const std::string& key) const { return plugin_ + ": [plugin.config] " + key; }
  static std::string list(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  }

  template <class T>
  T parse_checked(const std::string& key, const std::string& text,
                  const Bounds<typename detail::ConfigValue<T>::element>& bounds) const {
    if constexpr (std::is_same_v<T, std::vector<typename detail::ConfigValue<T>::element>>) {
      using E = typename detail::ConfigValue<T>::element;
      std::string body = detail::trim(text);
      if (body.size() >= 2 && body.front() == '[' && body.back() == ']')
        body = body.substr(1, body.size() - 2);
      T out;
      if (detail::trim(body).empty()) return out;
      std::stringstream ss(body + ",");  // the sentinel makes a trailing empty element visible
      std::string part;
      while (std::getline(ss, part, ',')) {
        part = detail::trim(part);
        // A TOML array of strings may reach the plugin with its quotes.
        if (part.size() >= 2 && (part.front() == '"' || part.front() == '\'') &&
            part.back() == part.front())
          part = part.substr(1, part.size() - 2);
        if (part.empty())
          invalid(where(key) + " = '" + text + "' has an empty element; write a list such as " +
                  "[a, b]");
        out.push_back(parse_checked<E>(key, part, bounds));
      }
      return out;
    } else {
      T v = parse<T>(key, text);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        if (v < bounds.lo || v > bounds.hi)
          invalid(where(key) + " = " + detail::show(v) + " is outside [" + detail::show(bounds.lo) +
                  ", " + detail::show(bounds.hi) + "]");
      }
      return v;
    }
  }

  template <class T>
  T parse(const std::string& key, const std::string& text) const {
    if constexpr (std::is_same_v<T, std::string>) {
      return text;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (text == "true") return true;
      if (text == "false") return false;
      invalid(where(key) + " = '" + text + "' is not a boolean; use true or false");
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      // strtoull would wrap "-1" to the largest value: a sign is refused first.
      char* end = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || text.find('-') != std::string::npos ||
          end != text.c_str() + text.size() || errno == ERANGE ||
          v > static_cast<unsigned long long>(std::numeric_limits<T>::max()))
        invalid(where(key) + " = '" + text +
                "' is not a non-negative integer (a whole number such as 4)");
      return static_cast<T>(v);
    } else if constexpr (std::is_integral_v<T>) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
          v < static_cast<long long>(std::numeric_limits<T>::min()) ||
          v > static_cast<long long>(std::numeric_limits<T>::max()))
        invalid(where(key) + " = '" + text + "' is not an integer (a whole number such as 4)");
      return static_cast<T>(v);
    } else {
      static_assert(std::is_floating_point_v<T>, "sdk::Config reads numbers, bools and strings");
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
          !std::isfinite(v) || std::fabs(v) > static_cast<double>(std::numeric_limits<T>::max()))
        invalid(where(key) + " = '" + text + "' is not a finite number (such as 0.5)");
      return static_cast<T>(v);
    }
  }

  std::string plugin_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> order_;  // keys as given, for a stable first error
  std::vector<std::string> known_;  // keys read or declared, in that order
};

}  // namespace encgraph::sdk
