#include <encoder_kit/config.hpp>
#include <encoder_kit/error.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace encoder_kit {

ConfigReader::ConfigReader(const eg_config_entry* entries, int64_t count, std::string plugin)
    : plugin_(std::move(plugin)) {
  for (int64_t i = 0; i < count; ++i) {
    if (!entries[i].key) continue;
    values_[entries[i].key] = entries[i].value ? entries[i].value : "";
  }
}

std::optional<std::string> ConfigReader::get(const std::string& key) {
  asked_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) {
  auto v = get(key);
  return v ? *v : fallback;
}

int64_t ConfigReader::get_int(const std::string& key, int64_t fallback) {
  auto v = get(key);
  return v ? parse_int(plugin_ + " config key '" + key + "'", *v) : fallback;
}

double ConfigReader::get_double(const std::string& key, double fallback) {
  auto v = get(key);
  return v ? parse_double(plugin_ + " config key '" + key + "'", *v) : fallback;
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) {
  auto v = get(key);
  return v ? parse_bool(plugin_ + " config key '" + key + "'", *v) : fallback;
}

std::vector<int64_t> ConfigReader::get_int_list(const std::string& key,
                                                const std::vector<int64_t>& fallback) {
  auto v = get(key);
  return v ? parse_int_list(plugin_ + " config key '" + key + "'", *v) : fallback;
}

std::vector<std::string> ConfigReader::get_string_list(const std::string& key,
                                                       const std::vector<std::string>& fallback) {
  auto v = get(key);
  return v ? parse_string_list(plugin_ + " config key '" + key + "'", *v) : fallback;
}

size_t ConfigReader::get_choice(const std::string& key, const std::vector<std::string>& names) {
  auto v = get(key);
  if (!v || names.empty()) return 0;
  std::string listed;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == *v) return i;
    listed += (i == 0 ? "\"" : ", \"") + names[i] + "\"";
  }
  fail(EG_ERR_INVALID_ARGUMENT, plugin_ + ": " + key + " = \"" + *v + "\" is not one of " + listed);
}

void ConfigReader::reject_unknown() const {
  std::string unknown;
  for (const auto& [k, v] : values_)
    if (!asked_.count(k)) unknown += (unknown.empty() ? "'" : ", '") + k + "'";
  if (unknown.empty()) return;
  std::string known;
  for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
  fail(EG_ERR_INVALID_ARGUMENT,
       "unknown config key(s) " + unknown + " for plugin " + plugin_ + " (known: " + known + ")");
}

ComputeDtype read_compute_dtype(ConfigReader& r, int32_t device) {
  const std::string& plugin = r.plugin();
  const std::string dtype = r.get_string("dtype", device == EG_DEVICE_CUDA ? "bf16" : "f32");
  ComputeDtype out;
  if (dtype == "f32" || dtype == "float32")
    out = ComputeDtype::F32;
  else if (dtype == "bf16" || dtype == "bfloat16")
    out = ComputeDtype::BF16;
  else
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": dtype '" + dtype + "' is not f32 or bf16");
  if (device == EG_DEVICE_CPU && out != ComputeDtype::F32)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": the CPU path computes in f32; set dtype = \"f32\"");
  if (device == EG_DEVICE_CUDA && out != ComputeDtype::BF16)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": the CUDA path computes in bf16; set dtype = \"bf16\"");
  return out;
}

void require_positive(const std::string& plugin, const char* name, int64_t value) {
  if (value <= 0)
    fail(EG_ERR_INVALID_ARGUMENT,
         plugin + ": " + name + " must be positive, got " + std::to_string(value));
}

void require_in_range(const std::string& plugin, const char* name, int64_t value, int64_t lo,
                      int64_t hi) {
  if (value < lo || value > hi)
    fail(EG_ERR_INVALID_ARGUMENT, plugin + ": " + name + " = " + std::to_string(value) +
                                      " is outside [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "]");
}

bool read_check_finite(ConfigReader& reader) {
  return reader.get_bool("check_finite", true);
}

int64_t parse_int(const std::string& what, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    fail(EG_ERR_INVALID_ARGUMENT, what + ": '" + text + "' is not an integer");
  return v;
}

double parse_double(const std::string& what, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    fail(EG_ERR_INVALID_ARGUMENT, what + ": '" + text + "' is not a number");
  if (!std::isfinite(v))
    fail(EG_ERR_INVALID_ARGUMENT, what + ": '" + text + "' is not a finite number");
  return v;
}

bool parse_bool(const std::string& what, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  fail(EG_ERR_INVALID_ARGUMENT, what + ": '" + text + "' is not a boolean (true/false)");
}

std::vector<int64_t> parse_int_list(const std::string& what, const std::string& text) {
  std::vector<int64_t> out;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(parse_int(what, cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == '[' || c == ']' || c == ' ' || c == '\t') continue;
    if (c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

std::vector<std::string> parse_string_list(const std::string& what, const std::string& text) {
  std::string body = text;
  const size_t first = body.find_first_not_of(" \t"), last = body.find_last_not_of(" \t");
  body = first == std::string::npos ? "" : body.substr(first, last - first + 1);
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']')
    body = body.substr(1, body.size() - 2);
  std::vector<std::string> out;
  if (body.find_first_not_of(" \t") == std::string::npos) return out;  // "[]"
  size_t start = 0;
  while (true) {
    const size_t comma = body.find(',', start);
    std::string e =
        body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t a = e.find_first_not_of(" \t\"'"), b = e.find_last_not_of(" \t\"'");
    e = a == std::string::npos ? "" : e.substr(a, b - a + 1);
    if (e.empty())
      fail(EG_ERR_INVALID_ARGUMENT, what + ": '" + text +
                                        "' has an empty element; write a list of "
                                        "names such as [\"a\", \"b\"]");
    out.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace encoder_kit
