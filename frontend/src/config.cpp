#include "config.hpp"

#include "config_schema.hpp"
#include "input_files.hpp"
#include "number_text.hpp"
#include "toml_util.hpp"

#include <encgraph/budget_plan.hpp>
#include <encgraph/error.hpp>
#include <encgraph/tuning_options.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace encgraph::host {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ", did you mean 'x'?" when a known name is one or two edits away.
std::string suggestion(std::string_view name, const std::vector<std::string_view>& known) {
  std::string_view best;
  size_t best_distance = 3;
  for (auto k : known) {
    const size_t d = edit_distance(name, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  return best.empty() ? "" : "; did you mean '" + std::string(best) + "'?";
}

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

std::vector<std::string_view> keys_of_section(std::string_view section) {
  std::vector<std::string_view> out;
  for (const auto& k : config_schema())
    if (k.path.substr(0, k.path.find('.')) == section)
      out.push_back(k.path.substr(k.path.find('.') + 1));
  return out;
}

[[noreturn]] void fail_node(const toml::node& node, const std::string& fallback,
                            const std::string& message) {
  throw_config(node_location(node, fallback) + ": " + message);
}

void check_elements(const toml::array& array, const std::string& path, const std::string& src,
                    bool (toml::node::*is)() const noexcept, std::string_view phrase) {
  for (size_t i = 0; i < array.size(); ++i)
    if (!(array.get(i)->*is)())
      fail_node(*array.get(i), src,
                path + "[" + std::to_string(i) + "]: expected " + std::string(phrase) + ", got " +
                    std::string(node_type_phrase(*array.get(i))));
}

// "+12_345": what a --set of an integer too large for TOML's 64 bits leaves
// behind as a plain string.
bool looks_like_integer(const toml::node& node) {
  const toml::value<std::string>* s = node.as_string();
  if (!s || s->get().empty()) return false;
  const std::string& text = s->get();
  const size_t start = text[0] == '+' || text[0] == '-' ? 1 : 0;
  return start < text.size() &&
         std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(), [](char ch) {
           return std::isdigit(static_cast<unsigned char>(ch)) || ch == '_';
         });
}

// A NUL cuts a C string (a file name, a device) short: what would be opened is
// not what was written.
void check_no_nul(const toml::node& node, const std::string& path, const std::string& src) {
  if (node.as_string()->get().find('\0') != std::string::npos)
    fail_node(node, src, path + ": the string holds a NUL character (\\u0000); remove it");
}

void check_type(const KeySpec& spec, const toml::node& node, const std::string& src) {
  const std::string path(spec.path);
  auto mismatch = [&](const std::string& hint = "") {
    fail_node(node, src,
              path + ": expected " + std::string(type_phrase(spec.type)) + ", got " +
                  std::string(node_type_phrase(node)) + hint);
  };
  switch (spec.type) {
    case KeyType::String:
      if (!node.is_string()) mismatch();
      check_no_nul(node, path, src);
      break;
    case KeyType::Integer:
      if (looks_like_integer(node))
        mismatch(
            " (a number outside the 64-bit integer range, -2^63 .. 2^63-1, is read as "
            "text)");
      if (!node.is_integer()) mismatch();
      break;
    case KeyType::Float:
      if (!node.is_number()) mismatch();
      if (node.is_floating_point() && !std::isfinite(node.as_floating_point()->get()))
        fail_node(node, src,
                  path + ": must be a finite number, got " +
                      std::string(std::isnan(node.as_floating_point()->get()) ? "nan" : "inf"));
      break;
    case KeyType::Boolean:
      if (!node.is_boolean()) mismatch();
      break;
    case KeyType::Table:
      if (!node.is_table()) mismatch();
      break;
    case KeyType::StringArray:
      // `--set key=[a, b]` is no TOML array (its strings lack quotes), so it
      // arrived as one string: say what to write instead.
      if (node.is_string() && node.as_string()->get().rfind('[', 0) == 0)
        mismatch(" (quote each element: [\"a\", \"b\"])");
      if (!node.is_array()) mismatch();
      check_elements(*node.as_array(), path, src, &toml::node::is_string, "a string");
      for (size_t i = 0; i < node.as_array()->size(); ++i)
        check_no_nul(*node.as_array()->get(i), path + "[" + std::to_string(i) + "]", src);
      break;
    case KeyType::IntegerArray:
      if (!node.is_array()) mismatch();
      check_elements(*node.as_array(), path, src, &toml::node::is_integer, "an integer");
      break;
    case KeyType::SizeArray: {
      if (!node.is_array()) mismatch();
      const toml::array& a = *node.as_array();
      for (size_t i = 0; i < a.size(); ++i) {
        const toml::array* pair = a.get(i)->as_array();
        const std::string element = path + "[" + std::to_string(i) + "]";
        if (!pair || pair->size() != 2)
          fail_node(*a.get(i), src,
                    element + ": expected a [height, width] pair, got " +
                        (pair ? "an array of " + std::to_string(pair->size())
                              : std::string(node_type_phrase(*a.get(i)))));
        check_elements(*pair, element, src, &toml::node::is_integer, "an integer");
      }
      break;
    }
  }
}

// Where a key was written; a key made by an override has no position of its
// own, its value has.
std::string key_location(const toml::key& key, const toml::node& value, const std::string& src) {
  return key.source().path ? source_location(key.source(), src) : node_location(value, src);
}

// A table whose keys the schema lists ([plugin.tuning]): each key known and of
// its type. Tables the schema lists no keys of (plugin.config, budgets.paths)
// are checked by their readers.
void check_nested_keys(const std::string& table, const toml::table& node, const std::string& src) {
  std::vector<std::string_view> known;
  for (const auto& k : config_schema())
    if (k.path.size() > table.size() + 1 && k.path.substr(0, table.size() + 1) == table + ".")
      known.push_back(k.path.substr(table.size() + 1));
  if (known.empty()) return;
  for (auto&& [sub, value] : node) {
    const std::string path = table + "." + std::string(sub.str());
    const KeySpec* spec = find_key(path);
    if (!spec)
      throw_config(key_location(sub, value, src) + ": unknown key '" + path + "' (known keys in [" +
                   table + "]: " + join(known) + ")" + suggestion(sub.str(), known));
    check_type(*spec, value, src);
  }
}

// Unknown sections and keys, and type mismatches, with their locations.
void check_keys(const toml::table& root, const std::string& src) {
  const auto& sections = config_sections();
  for (auto&& [key, node] : root) {
    const std::string section(key.str());
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      throw_config(key_location(key, node, src) + ": unknown key '" + section +
                   "' (known tables: " + join(sections) + ")" + suggestion(section, sections));
    if (!node.is_table())
      fail_node(node, src,
                "'" + section + "' must be a table ([" + section + "]), got " +
                    std::string(node_type_phrase(node)));
    const auto known = keys_of_section(section);
    for (auto&& [sub, value] : *node.as_table()) {
      const std::string path = section + "." + std::string(sub.str());
      const KeySpec* spec = find_key(path);
      if (!spec)
        throw_config(key_location(sub, value, src) + ": unknown key '" + path +
                     "' (known keys in [" + section + "]: " + join(known) + ")" +
                     suggestion(sub.str(), known));
      check_type(*spec, value, src);
      if (spec->type == KeyType::Table) check_nested_keys(path, *value.as_table(), src);
    }
  }
}

// Typed access to validated keys; `fail` names the key and where it was set.
class Reader {
 public:
  Reader(const toml::table& root, std::string src) : root_(root), src_(std::move(src)) {}

  const toml::node* node(std::string_view path) const { return root_.at_path(path).node(); }

  const std::string& source() const { return src_; }

  // `message` is prefixed with the key unless it already names it.
  [[noreturn]] void fail(std::string_view path, const std::string& message) const {
    const toml::node* n = node(path);
    const std::string where =
        n ? node_location(*n, src_) : src_ + " (default of " + std::string(path) + ")";
    const bool named = message.rfind(std::string(path), 0) == 0;
    throw_config(where + ": " + (named ? "" : std::string(path) + ": ") + message);
  }

  template <class T>
  void get(std::string_view path, T& out) const {
    if (const toml::node* n = node(path)) {
      if constexpr (std::is_same_v<T, double>)
        out = n->is_integer() ? static_cast<double>(n->as_integer()->get())
                              : n->as_floating_point()->get();
      else
        out = n->as<T>()->get();
    }
  }
  void get(std::string_view path, int64_t& out) const {
    if (const toml::node* n = node(path)) out = n->as_integer()->get();
  }
  void get(std::string_view path, std::vector<std::string>& out) const {
    if (const toml::node* n = node(path)) {
      out.clear();
      for (auto&& e : *n->as_array()) out.push_back(e.as_string()->get());
    }
  }
  void get(std::string_view path, std::vector<int64_t>& out) const {
    if (const toml::node* n = node(path)) {
      out.clear();
      for (auto&& e : *n->as_array()) out.push_back(e.as_integer()->get());
    }
  }
  void get(std::string_view path, std::vector<std::array<int64_t, 2>>& out) const {
    if (const toml::node* n = node(path)) {
      out.clear();
      for (auto&& e : *n->as_array()) {
        const toml::array& p = *e.as_array();
        out.push_back({p.get(0)->as_integer()->get(), p.get(1)->as_integer()->get()});
      }
    }
  }

 private:
  const toml::table& root_;
  std::string src_;
};

// "cuda:N" with one to three digits.
bool is_numbered_cuda(const std::string& device) {
  return device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() < 9 &&
         std::all_of(device.begin() + 5, device.end(),
                     [](char ch) { return ch >= '0' && ch <= '9'; });
}

void check_min(const Reader& r, std::string_view path, int64_t value, int64_t min) {
  if (value < min)
    r.fail(path, "must be >= " + std::to_string(min) + ", got " + std::to_string(value));
}

// `value` <= the limit `limit_key` sets (or a fixed bound when limit_key is empty).
void check_max(const Reader& r, std::string_view path, int64_t value, int64_t max,
               const std::string& limit_key = "") {
  if (value <= max) return;
  if (limit_key.empty())
    r.fail(path, "must be <= " + std::to_string(max) + ", got " + std::to_string(value));
  r.fail(path, std::to_string(value) + " exceeds " + limit_key + " (" + std::to_string(max) +
                   "); lower " + std::string(path) + " or raise " + limit_key + " in [limits]");
}

// [limits]: each positive and under a ceiling, so that a limit cannot be
// raised past what the arithmetic behind it handles.
void read_limits(const Reader& r, HostConfig& c) {
  LimitsConfig& l = c.limits;
  struct Limit {
    const char* key;
    int64_t* value;
    int64_t ceiling;
  };
  const Limit limits[] = {
      {"limits.max_graphs", &l.max_graphs, int64_t{1} << 16},
      {"limits.max_items", &l.max_items, int64_t{1} << 32},
      {"limits.max_request_size", &l.max_request_size, int64_t{1} << 20},
      {"limits.max_frames_per_video", &l.max_frames_per_video, int64_t{1} << 20},
      {"limits.max_image_pixels", &l.max_image_pixels, int64_t{1} << 32},
      {"limits.max_text_bytes", &l.max_text_bytes, int64_t{1} << 32},
  };
  for (const Limit& limit : limits) {
    r.get(limit.key, *limit.value);
    if (*limit.value < 1 || *limit.value > limit.ceiling)
      r.fail(limit.key, "must lie in [1, " + std::to_string(limit.ceiling) + "], got " +
                            std::to_string(*limit.value));
  }
  c.runtime.budgets.max_graphs = l.max_graphs;
}

void read_runtime(const Reader& r, HostConfig& c) {
  RuntimeConfig& rt = c.runtime;
  r.get("runtime.device", rt.device);
  try {
    check_device_string(rt.device, "runtime.device");
  } catch (const Error& e) {
    r.fail("runtime.device", e.what());
  }
  r.get("runtime.log_level", c.log_level);
  static const std::vector<std::string_view> levels = {"trace", "debug",    "info", "warn",
                                                       "error", "critical", "off"};
  if (std::find(levels.begin(), levels.end(), c.log_level) == levels.end())
    r.fail("runtime.log_level",
           "\"" + printable(c.log_level) + "\" is not a log level; use one of " + join(levels));
  std::vector<std::string> dirs;
  r.get("runtime.plugin_dirs", dirs);
  rt.plugin_dirs.assign(dirs.begin(), dirs.end());
  r.get("runtime.use_graphs", rt.use_graphs);
  r.get("runtime.drop_budget_on_oom", rt.drop_budget_on_oom);
  r.get("runtime.prefer_faster_path", rt.prefer_faster_path);
  r.get("runtime.pipeline_first_batch", rt.pipeline_first_batch);
  r.get("runtime.overlap_uploads", rt.overlap_uploads);
  int64_t item_threads = rt.item_threads;
  r.get("runtime.item_threads", item_threads);
  if (item_threads < 0 || item_threads > RuntimeConfig::kMaxItemThreads)
    r.fail("runtime.item_threads",
           "must lie in [0, " + std::to_string(RuntimeConfig::kMaxItemThreads) +
               "] (0: one per core, at most 8), got " + std::to_string(item_threads));
  rt.item_threads = static_cast<int>(item_threads);
  r.get("runtime.poison_memory", rt.poison_memory);
  r.get("runtime.stats_log_interval", rt.stats_log_interval);
  check_min(r, "runtime.stats_log_interval", rt.stats_log_interval, 0);
}

// runtime.data_parallel: two or more ranks (one device is runtime.device's
// job), all "cpu" or all distinct "cuda:N" (what DataParallelRuntime and NCCL
// take). runtime.device is not used then; an explicit one of the other kind is
// refused, as it shows the user expects another device than the ranks get.
void read_data_parallel(const Reader& r, HostConfig& c) {
  const std::string key = "runtime.data_parallel";
  std::vector<std::string>& devices = c.data_parallel;
  r.get(key, devices);
  if (devices.empty()) return;
  if (devices.size() == 1)
    r.fail(key, "one device is not data parallel; set runtime.device = \"" + devices[0] +
                    "\" instead and drop runtime.data_parallel, or list two or more devices");
  auto element = [&](size_t i) { return key + "[" + std::to_string(i) + "]"; };
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] != "cpu" && !is_numbered_cuda(devices[i]))
      r.fail(element(i), "\"" + printable(devices[i]) +
                             "\" is not a data-parallel device; use \"cpu\" or \"cuda:N\" "
                             "(\"cuda:0\", \"cuda:1\", ...)");
  const bool cpu = devices.front() == "cpu";
  for (size_t i = 1; i < devices.size(); ++i) {
    if ((devices[i] == "cpu") != cpu)
      r.fail(element(i), "\"" + printable(devices[i]) + "\" mixed with \"" + devices.front() +
                             "\": the ranks must be all \"cpu\" or all \"cuda:N\"");
    const auto earlier = devices.begin() + static_cast<std::ptrdiff_t>(i);
    if (!cpu && std::find(devices.begin(), earlier, devices[i]) != earlier)
      r.fail(element(i), "\"" + devices[i] +
                             "\" is listed twice: each GPU takes one rank (only \"cpu\" repeats)");
  }
  const std::string& device = c.runtime.device;
  if (r.node("runtime.device") && device != "auto" && (device == "cpu") != cpu)
    r.fail("runtime.device",
           "runtime.device = \"" + device +
               "\" conflicts with runtime.data_parallel, whose ranks run " +
               (cpu ? "on the CPU" : "on CUDA") +
               "; with runtime.data_parallel set the ranks' devices come from it alone: remove "
               "runtime.device (or set it to \"auto\"), or drop runtime.data_parallel");
}

// runtime.distributed: which launch to join and how long to wait for a rank.
void read_distributed(const Reader& r, HostConfig& c) {
  DistributedConfig& d = c.distributed;
  r.get("distributed.launch", d.launch);
  if (d.launch != "auto" && d.launch != "mpi" && d.launch != "env" && d.launch != "off")
    r.fail("distributed.launch",
           "\"" + printable(d.launch) + "\" is not one of \"auto\", \"mpi\", \"env\", \"off\"");
  r.get("distributed.id_file", d.id_file);
  r.get("distributed.job_id", d.job_id);
  r.get("distributed.timeout_s", d.timeout_s);
  if (!(d.timeout_s > 0.0) || d.timeout_s > 86400.0 * 7)
    r.fail("distributed.timeout_s", "must be a positive number of seconds (at most a week), got " +
                                        number_text(d.timeout_s));
}

// A core Config error about one setting, located where the TOML set it (the
// element of a list when it names one).
[[noreturn]] void fail_setting(const Reader& r, const Error& e) {
  const toml::node* n = r.node(e.key());
  if (n && e.index() >= 0 && n->is_array() &&
      static_cast<size_t>(e.index()) < n->as_array()->size())
    fail_node(*n->as_array()->get(static_cast<size_t>(e.index())), r.source(),
              e.key() + ": " + e.detail());
  r.fail(e.key(), e.detail());
}

void read_plugin(const Reader& r, const toml::table& root, HostConfig& c) {
  RuntimeConfig& rt = c.runtime;
  r.get("plugin.name", rt.plugin);
  if (rt.plugin.empty())
    r.fail("plugin.name", "is required: name the plugin to run (see `encgraph plugins`)");
  for (char ch : rt.plugin)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.'))
      r.fail("plugin.name",
             "\"" + printable(rt.plugin) + "\" may only hold letters, digits, '_', '-' and '.'");
  r.get("plugin.weights", rt.weights);
  rt.plugin_config.clear();
  if (const toml::node* n = root.at_path("plugin.config").node())
    flatten_table(*n->as_table(), "", rt.plugin_config);
  rt.tuning.clear();
  if (const toml::node* n = r.node("plugin.tuning.cpu_threads"))
    rt.tuning.emplace_back("cpu_threads", std::to_string(n->as_integer()->get()));
  if (const toml::node* n = r.node("plugin.tuning.cache_dir"))
    rt.tuning.emplace_back("cache_dir", n->as_string()->get());
  // The values' rules are core's, which checks them again when a runtime is made.
  try {
    check_tuning_options(rt.tuning);
  } catch (const Error& e) {
    if (e.key().empty()) throw;
    fail_setting(r, e);
  }
}

// [budgets.paths.<name>]: one path's own token_budgets or token_step, read as
// written; the budget rules are core's (check_budget_request, below). Whether
// the plugin has a path of that name is known when the runtime is made
// (plan_budgets).
void read_path_budgets(const Reader& r, BudgetRequest& b) {
  const toml::node* paths = r.node("budgets.paths");
  if (!paths) return;
  const std::string& src = r.source();
  static const std::vector<std::string_view> known = {"token_budgets", "token_step"};
  for (auto&& [name_key, node] : *paths->as_table()) {
    const std::string name(name_key.str());
    const std::string key = "budgets.paths." + printable(name);
    // Path names are the plugin's (e.g. "global", "local"): echoed in messages
    // and logs, so no control characters.
    if (name.empty() || printable(name) != name)
      throw_config(key_location(name_key, node, src) + ": '" + key +
                   "': a path name must be non-empty printable text, the plugin's name of the "
                   "path (e.g. global, local)");
    if (!node.is_table())
      fail_node(node, src,
                key + ": expected a table ([" + key + "] with token_budgets or token_step), got " +
                    std::string(node_type_phrase(node)));
    PathBudgetRequest& own = b.paths[name];
    for (auto&& [sub, value] : *node.as_table()) {
      const std::string sub_name(sub.str());
      if (std::find(known.begin(), known.end(), sub_name) == known.end())
        throw_config(key_location(sub, value, src) + ": unknown key '" + key + "." +
                     printable(sub_name) + "' (known keys in [" + key + "]: " + join(known) + ")" +
                     suggestion(sub_name, known));
      const bool list = sub_name == "token_budgets";
      check_type({key + "." + sub_name, list ? KeyType::IntegerArray : KeyType::Integer, "", ""},
                 value, src);
      if (list)
        for (auto&& e : *value.as_array()) own.token_budgets.push_back(e.as_integer()->get());
      else
        own.token_step = value.as_integer()->get();
    }
  }
}

void read_budgets(const Reader& r, HostConfig& c) {
  BudgetRequest& b = c.runtime.budgets;
  r.get("budgets.token_budgets", b.token_budgets);
  r.get("budgets.token_step", b.token_step);
  r.get("budgets.max_items_per_batch", b.max_items_per_batch);
  if (r.node("budgets.max_frames_per_batch")) {
    int64_t frames = 0;
    r.get("budgets.max_frames_per_batch", frames);
    b.max_frames_per_batch = frames;
  }
  r.get("budgets.video", b.video_enabled);
  read_path_budgets(r, b);
  // Every rule that needs no plugin, by the code that plans budgets in the
  // runtime; the plugin-dependent ones run when the runtime is made.
  try {
    check_budget_request(b);
  } catch (const Error& e) {
    if (e.key().empty()) throw;
    fail_setting(r, e);
  }
}

void read_workload(const Reader& r, HostConfig& c, ConfigUse use) {
  WorkloadConfig& w = c.workload;
  r.get("workload.kind", w.kind);
  if (w.kind != "synthetic" && w.kind != "trace" && w.kind != "files")
    r.fail("workload.kind",
           "\"" + printable(w.kind) +
               "\" is not a workload kind; use \"synthetic\", \"trace\" or \"files\"");
  // The synthetic workload's bounds hold only when it is the one that runs.
  const bool synthetic = w.kind == "synthetic" && !use.workload_replaced;
  const LimitsConfig& limits = c.limits;
  r.get("workload.count", w.count);
  check_min(r, "workload.count", w.count, 0);
  if (synthetic) check_max(r, "workload.count", w.count, limits.max_items, "limits.max_items");
  int64_t seed = 0;
  r.get("workload.seed", seed);
  check_min(r, "workload.seed", seed, 0);
  w.seed = static_cast<uint64_t>(seed);
  r.get("workload.sizes", w.sizes);
  for (const auto& s : w.sizes) {
    // Appended piece by piece: GCC 12's -Wrestrict misfires on "[" + to_string(...).
    std::string pair = "[";
    pair.append(std::to_string(s[0])).append(", ").append(std::to_string(s[1])).append("]");
    if (s[0] <= 0 || s[1] <= 0) r.fail("workload.sizes", "sizes must be positive, got " + pair);
    if (synthetic && s[0] > limits.max_image_pixels / s[1])
      r.fail("workload.sizes", pair + " has more pixels than limits.max_image_pixels (" +
                                   std::to_string(limits.max_image_pixels) +
                                   "); use smaller sizes or raise limits.max_image_pixels");
  }
  r.get("workload.min_side", w.min_side);
  r.get("workload.max_side", w.max_side);
  r.get("workload.side_multiple", w.side_multiple);
  check_min(r, "workload.side_multiple", w.side_multiple, 1);
  check_min(r, "workload.min_side", w.min_side, 1);
  if (w.max_side < w.min_side)
    r.fail("workload.max_side", "must be >= workload.min_side (" + std::to_string(w.min_side) +
                                    "), got " + std::to_string(w.max_side));
  if (w.sizes.empty() && synthetic && w.max_side > limits.max_image_pixels / w.max_side)
    r.fail("workload.max_side", std::to_string(w.max_side) + " x " + std::to_string(w.max_side) +
                                    " pixels exceed limits.max_image_pixels (" +
                                    std::to_string(limits.max_image_pixels) +
                                    "); lower workload.max_side or raise limits.max_image_pixels");
  if (w.sizes.empty() && (w.max_side / w.side_multiple) * w.side_multiple < w.min_side)
    r.fail("workload.side_multiple", "no multiple of " + std::to_string(w.side_multiple) +
                                         " lies between min_side " + std::to_string(w.min_side) +
                                         " and max_side " + std::to_string(w.max_side));
  r.get("workload.video_fraction", w.video_fraction);
  if (!std::isfinite(w.video_fraction))
    r.fail("workload.video_fraction", "must be a finite number in [0, 1]");
  if (!(w.video_fraction >= 0.0 && w.video_fraction <= 1.0))
    r.fail("workload.video_fraction", "must lie in [0, 1], got " + number_text(w.video_fraction));
  if (w.video_fraction > 0.0 && !c.runtime.budgets.video_enabled)
    r.fail("workload.video_fraction",
           "asks for videos but budgets.video = false plans no frames; "
           "set one of them differently");
  r.get("workload.frames", w.frames);
  check_min(r, "workload.frames", w.frames, 1);
  if (synthetic)
    check_max(r, "workload.frames", w.frames, limits.max_frames_per_video,
              "limits.max_frames_per_video");
  r.get("workload.trace", w.trace);
  r.get("workload.files", w.files);
  if (w.kind == "trace" && w.trace.empty())
    r.fail("workload.trace", "is required when workload.kind = \"trace\"");
  if (w.kind == "files" && w.files.empty())
    r.fail("workload.files",
           "is required when workload.kind = \"files\" (or give files to `encgraph encode`)");
  r.get("workload.request_size", w.request_size);
  check_min(r, "workload.request_size", w.request_size, 1);
  check_max(r, "workload.request_size", w.request_size, limits.max_request_size,
            "limits.max_request_size");
  r.get("workload.warmup_requests", w.warmup_requests);
  check_min(r, "workload.warmup_requests", w.warmup_requests, 0);
}

// [video]: the sampling settings; the folder's and the family's defaults are
// applied when a video file is read (video_sampling.cpp).
void read_video(const Reader& r, HostConfig& c) {
  VideoConfig& v = c.workload.video;
  r.get("video.sampling", v.sampling);
  if (v.sampling != "auto" && v.sampling != "qwen2_5_vl" && v.sampling != "qwen3_vl" &&
      v.sampling != "qwen2_5_vl_transformers")
    r.fail("video.sampling", "\"" + printable(v.sampling) +
                                 "\" is not a sampling rule; use \"auto\", \"qwen2_5_vl\", "
                                 "\"qwen2_5_vl_transformers\" or \"qwen3_vl\"");
  if (r.node("video.fps")) {
    double fps = 0.0;
    r.get("video.fps", fps);
    if (!(fps > 0.0) || fps > 1e6)
      r.fail("video.fps", "must be a positive number of frames per second (at most 1e6), got " +
                              number_text(fps));
    v.fps = fps;
  }
  const std::pair<const char*, std::optional<int64_t>*> counts[] = {
      {"video.min_frames", &v.min_frames}, {"video.max_frames", &v.max_frames}};
  for (const auto& [key, dst] : counts) {
    if (!r.node(key)) continue;
    int64_t frames = 0;
    r.get(key, frames);
    check_min(r, key, frames, 1);
    check_max(r, key, frames, int64_t{1} << 20);
    *dst = frames;
  }
  if (v.min_frames && v.max_frames && *v.max_frames < *v.min_frames)
    r.fail("video.max_frames", "must be >= video.min_frames (" + std::to_string(*v.min_frames) +
                                   "), got " + std::to_string(*v.max_frames));
  v.plugin = c.runtime.plugin;
  v.weights = c.runtime.weights;
}

// [serve]: each key within bounds that keep the arithmetic behind it (and
// the machine) safe; max_pixels may not exceed limits.max_image_pixels.
void read_serve(const Reader& r, HostConfig& c) {
  ServeConfig& s = c.serve;
  r.get("serve.host", s.host);
  if (s.host.empty() || s.host.find_first_of(" /\t\r\n") != std::string::npos)
    r.fail("serve.host", "\"" + printable(s.host) +
                             "\" is not a host address; give an IP address such as "
                             "\"127.0.0.1\" or \"0.0.0.0\"");
  struct Bound {
    const char* key;
    int64_t* value;
    int64_t min;
    int64_t max;
  };
  const Bound bounds[] = {
      {"serve.port", &s.port, 0, 65535},
      {"serve.max_queue_delay_us", &s.max_queue_delay_us, 0, int64_t{60} * 1000 * 1000},
      {"serve.max_queue_items", &s.max_queue_items, 1, int64_t{1} << 24},
      {"serve.cache_bytes", &s.cache_bytes, 0, int64_t{1} << 40},
      {"serve.max_body_bytes", &s.max_body_bytes, 1024, int64_t{1} << 32},
      {"serve.max_items_per_request", &s.max_items_per_request, 1, int64_t{1} << 16},
      {"serve.max_pixels", &s.max_pixels, 1, int64_t{1} << 32},
      {"serve.request_timeout_ms", &s.request_timeout_ms, 1, int64_t{3600} * 1000},
      {"serve.threads", &s.threads, 1, 256},
      {"serve.batches_in_flight", &s.batches_in_flight, 0, 2},
  };
  for (const Bound& b : bounds) {
    r.get(b.key, *b.value);
    if (*b.value < b.min || *b.value > b.max)
      r.fail(b.key, "must lie in [" + std::to_string(b.min) + ", " + std::to_string(b.max) +
                        "], got " + std::to_string(*b.value));
  }
  // Left unset it follows a lower limits.max_image_pixels; set, it must fit.
  if (!r.node("serve.max_pixels")) s.max_pixels = std::min(s.max_pixels, c.limits.max_image_pixels);
  check_max(r, "serve.max_pixels", s.max_pixels, c.limits.max_image_pixels,
            "limits.max_image_pixels");
}

HostConfig resolve(toml::table& root, const std::string& src,
                   const std::vector<std::string>& overrides, ConfigUse use) {
  for (const auto& o : overrides) apply_override(root, o);
  check_keys(root, src);
  const Reader reader(root, src);
  HostConfig c;
  c.source = src;
  read_limits(reader, c);  // first: the other sections are checked against them
  read_runtime(reader, c);
  read_data_parallel(reader, c);
  read_distributed(reader, c);
  read_plugin(reader, root, c);
  read_budgets(reader, c);
  read_workload(reader, c, use);
  read_video(reader, c);
  read_serve(reader, c);
  reader.get("output.embeddings", c.output.embeddings);
  reader.get("output.report", c.output.report);
  c.digest = config_digest(c);
  return c;
}

template <class T>
std::string list(const std::vector<T>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// " (in: `seed = 1e400`)": the line an error points at, which names the key.
std::string line_excerpt(std::string_view text, toml::source_index line) {
  size_t start = 0;
  for (toml::source_index l = 1; l < line && start != std::string_view::npos; ++l) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos || start >= text.size()) return "";
  std::string_view row = text.substr(start, text.find('\n', start) - start);
  const bool cut = row.size() > 120;
  if (cut) row = row.substr(0, 120);
  const std::string shown = printable(row);
  return shown.empty() ? "" : " (in: `" + shown + (cut ? "..." : "") + "`)";
}

}  // namespace

void check_device_string(const std::string& device, const std::string& where) {
  if (device == "auto" || device == "cpu" || device == "cuda") return;
  if (is_numbered_cuda(device) || device == "cuda:{local_rank}") return;
  throw_config(where + ": \"" + printable(device) +
               "\" is not a device; use \"auto\", \"cpu\", \"cuda\", \"cuda:N\" or "
               "\"cuda:{local_rank}\" (each process of a multi-process job its own GPU)");
}

const std::string& execution_device(const HostConfig& config) {
  return config.data_parallel.empty() ? config.runtime.device : config.data_parallel.front();
}

HostConfig load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                       ConfigUse use) {
  // Regular files only: a FIFO would block, /dev/zero would never end. The cap
  // is fixed (the limits are read from this very file).
  const std::string text =
      read_text_input(file, "config", kMaxConfigBytes,
                      "a fixed cap: a config is a few kilobytes; name the TOML config file");
  return load_config_text(text, file.string(), overrides, use);
}

HostConfig load_config_text(std::string_view text, const std::string& source_name,
                            const std::vector<std::string>& overrides, ConfigUse use) {
  check_key_depth(text, source_name);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    throw_config(source_name + ":" + std::to_string(e.source().begin.line) + ":" +
                 std::to_string(e.source().begin.column) + ": TOML syntax error: " +
                 std::string(e.description()) + line_excerpt(text, e.source().begin.line));
  }
  return resolve(root, source_name, overrides, use);
}

std::string config_digest(const HostConfig& config) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char ch : canonical_config(config)) h = (h ^ ch) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string canonical_config(const HostConfig& c) {
  // Output paths and logging do not change what is measured: left out.
  std::map<std::string, std::string> kv;
  const RuntimeConfig& rt = c.runtime;
  // Data parallel does not use runtime.device: leave it out then, so that files
  // meaning the same run share a digest.
  if (c.data_parallel.empty()) kv["runtime.device"] = rt.device;
  // Only when set, so that the digests of configs without it stay as they were.
  if (!c.data_parallel.empty()) kv["runtime.data_parallel"] = list(c.data_parallel);
  std::vector<std::string> dirs;
  for (const auto& d : rt.plugin_dirs) dirs.push_back(d.string());
  kv["runtime.plugin_dirs"] = list(dirs);
  kv["runtime.use_graphs"] = rt.use_graphs ? "true" : "false";
  kv["runtime.drop_budget_on_oom"] = rt.drop_budget_on_oom ? "true" : "false";
  kv["runtime.prefer_faster_path"] = rt.prefer_faster_path ? "true" : "false";
  kv["runtime.pipeline_first_batch"] = rt.pipeline_first_batch ? "true" : "false";
  kv["runtime.overlap_uploads"] = rt.overlap_uploads ? "true" : "false";
  kv["runtime.poison_memory"] = rt.poison_memory ? "true" : "false";
  kv["plugin.name"] = rt.plugin;
  kv["plugin.weights"] = rt.weights;
  for (const auto& [k, v] : rt.plugin_config) kv["plugin.config." + k] = v;
  kv["budgets.token_budgets"] = list(rt.budgets.token_budgets);
  kv["budgets.max_items_per_batch"] = std::to_string(rt.budgets.max_items_per_batch);
  // Only when set, so that the digests of configs without it stay as they were.
  if (rt.budgets.token_step > 0) kv["budgets.token_step"] = std::to_string(rt.budgets.token_step);
  kv["budgets.max_frames_per_batch"] =
      rt.budgets.max_frames_per_batch ? std::to_string(*rt.budgets.max_frames_per_batch) : "auto";
  kv["budgets.video"] = rt.budgets.video_enabled ? "true" : "false";
  // Per-path budgets only when set, so that the digests of configs without them stay.
  for (const auto& [name, own] : rt.budgets.paths) {
    const std::string key = "budgets.paths." + toml_quote(name);
    if (!own.token_budgets.empty()) kv[key + ".token_budgets"] = list(own.token_budgets);
    if (own.token_step > 0) kv[key + ".token_step"] = std::to_string(own.token_step);
  }
  const WorkloadConfig& w = c.workload;
  kv["workload.kind"] = w.kind;
  if (w.kind == "synthetic") {
    kv["workload.count"] = std::to_string(w.count);
    kv["workload.seed"] = std::to_string(w.seed);
    std::vector<std::string> sizes;
    for (const auto& s : w.sizes) sizes.push_back(list(std::vector<int64_t>{s[0], s[1]}));
    kv["workload.sizes"] = list(sizes);
    kv["workload.min_side"] = std::to_string(w.min_side);
    kv["workload.max_side"] = std::to_string(w.max_side);
    kv["workload.side_multiple"] = std::to_string(w.side_multiple);
    kv["workload.video_fraction"] = std::to_string(w.video_fraction);
    kv["workload.frames"] = std::to_string(w.frames);
  } else if (w.kind == "trace") {
    kv["workload.trace"] = w.trace;
  } else {
    kv["workload.files"] = list(w.files);
  }
  // Video keys only when set, so that the digests of configs without them stay
  // as they were.
  if (w.video.sampling != "auto") kv["video.sampling"] = w.video.sampling;
  if (w.video.fps) kv["video.fps"] = std::to_string(*w.video.fps);
  if (w.video.min_frames) kv["video.min_frames"] = std::to_string(*w.video.min_frames);
  if (w.video.max_frames) kv["video.max_frames"] = std::to_string(*w.video.max_frames);
  kv["workload.request_size"] = std::to_string(w.request_size);
  kv["workload.warmup_requests"] = std::to_string(w.warmup_requests);
  // Limits only when changed, so that the digests of configs without them stay
  // as they were.
  const LimitsConfig l = c.limits, d;
  const std::pair<const char*, std::pair<int64_t, int64_t>> limits[] = {
      {"limits.max_graphs", {l.max_graphs, d.max_graphs}},
      {"limits.max_items", {l.max_items, d.max_items}},
      {"limits.max_request_size", {l.max_request_size, d.max_request_size}},
      {"limits.max_frames_per_video", {l.max_frames_per_video, d.max_frames_per_video}},
      {"limits.max_image_pixels", {l.max_image_pixels, d.max_image_pixels}},
      {"limits.max_text_bytes", {l.max_text_bytes, d.max_text_bytes}},
  };
  for (const auto& [key, values] : limits)
    if (values.first != values.second) kv[key] = std::to_string(values.first);
  std::string out;
  for (const auto& [k, v] : kv) out += k + " = " + v + "\n";
  return out;
}

}  // namespace encgraph::host
