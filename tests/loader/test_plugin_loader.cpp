// Plugin discovery and ABI checks against real plugins built by this suite: one
// valid, one per way a plugin can be broken. Every broken file must produce its
// own error naming the file and the reason, and none may take the process down.
#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using encgraph::Error;
using encgraph::ErrorKind;
using encgraph::PluginRegistry;

namespace {

const fs::path kRoot = LOADER_PLUGIN_ROOT;

fs::path dir(const std::string& scenario) {
  return kRoot / scenario;
}
fs::path plugin_file(const std::string& scenario, const std::string& file) {
  return dir(scenario) / ("libencgraph_" + file + ".so");
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

const std::string kRuntimeAbi =
    std::to_string(EG_ABI_VERSION_MAJOR) + "." + std::to_string(EG_ABI_VERSION_MINOR);

// One broken file and the phrases its error must contain; `reasons[0]` is the
// phrase no other broken file's error may contain.
struct Broken {
  std::string scenario;
  std::string file;
  std::vector<std::string> reasons;
  fs::path path() const { return plugin_file(scenario, file); }
};

const std::vector<Broken>& broken_plugins() {
  static const std::vector<Broken> all = {
      {"wrong_major",
       "loader_wrong_major",
       {"built for plugin ABI 2.0", "this runtime speaks ABI " + kRuntimeAbi}},
      {"short_table",
       "loader_short_table",
       {"plugin table is 64 bytes", "smaller than the 192 bytes ABI 1.0 requires"}},
      {"missing_function", "loader_missing_function", {"required function 'forward' is NULL"}},
      {"entry_throws",
       "loader_entry_throws",
       {"entry function threw an exception", "no exception may cross the C boundary"}},
      {"entry_null", "loader_entry_null", {"entry function returned no table"}},
      {"bad_name", "loader_bad_name", {"plugin name 'bad/name' is invalid", "no path separators"}},
      {"no_entry", "loader_no_entry", {"does not export the entry symbol 'encgraph_plugin_entry'"}},
      {"unresolved", "loader_unresolved", {"could not be loaded", "eg_test_symbol_nobody_defines"}},
      {"text", "text", {"not a shared library (no ELF header)"}},
  };
  return all;
}

// Every scenario folder, for registry and CLI runs that see all of them at once.
std::vector<fs::path> all_dirs() {
  std::vector<fs::path> dirs = {dir("valid"), dir("create_throws"), dir("duplicate")};
  for (const auto& b : broken_plugins()) dirs.push_back(dir(b.scenario));
  return dirs;
}

// The message load_plugin_file throws for `file`, checked to be a plugin error.
std::string load_error(const fs::path& file) {
  try {
    encgraph::load_plugin_file(file);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Plugin);
    return e.what();
  }
  FAIL("loading " << file << " succeeded but should have been refused");
  return {};
}

// Sets ENCGRAPH_PLUGIN_PATH (or unsets it for nullopt) and restores it on exit.
class ScopedPluginPath {
 public:
  explicit ScopedPluginPath(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("ENCGRAPH_PLUGIN_PATH")) old_ = old;
    if (value)
      setenv("ENCGRAPH_PLUGIN_PATH", value->c_str(), 1);
    else
      unsetenv("ENCGRAPH_PLUGIN_PATH");
  }
  ~ScopedPluginPath() {
    if (old_)
      setenv("ENCGRAPH_PLUGIN_PATH", old_->c_str(), 1);
    else
      unsetenv("ENCGRAPH_PLUGIN_PATH");
  }
  ScopedPluginPath(const ScopedPluginPath&) = delete;
  ScopedPluginPath& operator=(const ScopedPluginPath&) = delete;

 private:
  std::optional<std::string> old_;
};

const encgraph::LoadedPlugin* find_plugin(const PluginRegistry& r, const std::string& name) {
  for (const auto& p : r.plugins())
    if (p.name == name) return &p;
  return nullptr;
}

const encgraph::RejectedPlugin* find_rejected(const PluginRegistry& r, const fs::path& file) {
  for (const auto& x : r.rejected())
    if (x.file == file) return &x;
  return nullptr;
}

// Runs a shell command, returning its exit status and stdout+stderr.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  return {status, output};
}

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
std::string quoted(const fs::path& p) {
  std::string q = "'";
  q += p.string();
  q += "'";
  return q;
}

}  // namespace

TEST_CASE("a valid plugin loads with its table's identity") {
  const encgraph::LoadedPlugin p = encgraph::load_plugin_file(plugin_file("valid", "loader_ok"));
  CHECK(p.name == "loader_ok");
  CHECK(p.version == "1.2.3");
  CHECK(p.description == "loader test plugin");
  CHECK(p.abi_major == EG_ABI_VERSION_MAJOR);
  CHECK(p.abi_minor == EG_ABI_VERSION_MINOR);
  CHECK(p.file == plugin_file("valid", "loader_ok"));
  REQUIRE(p.api != nullptr);
  CHECK(p.api->devices == EG_DEVICE_CPU);
}

TEST_CASE("each broken plugin yields its own error naming the file and the reason") {
  for (const Broken& b : broken_plugins()) {
    CAPTURE(b.scenario);
    REQUIRE(fs::exists(b.path()));
    const std::string message = load_error(b.path());
    CAPTURE(message);
    CHECK(message.rfind(b.path().string() + ": ", 0) == 0);  // starts with the file
    for (const auto& reason : b.reasons) CHECK(contains(message, reason));
    for (const Broken& other : broken_plugins())
      if (other.scenario != b.scenario) CHECK_FALSE(contains(message, other.reasons[0]));
  }
}

TEST_CASE("a file that is not there is refused, not crashed on") {
  const std::string message = load_error(dir("valid") / "libencgraph_absent.so");
  CHECK(contains(message, "libencgraph_absent.so: not a regular file"));
}

TEST_CASE("the registry lists the valid plugins and rejects each broken one with its reason") {
  const PluginRegistry registry(all_dirs());
  const encgraph::LoadedPlugin* ok = find_plugin(registry, "loader_ok");
  REQUIRE(ok != nullptr);
  CHECK(ok->file == plugin_file("valid", "loader_ok"));
  // create throws only when an instance is made: the file itself is a valid plugin.
  CHECK(find_plugin(registry, "loader_create_throws") != nullptr);

  for (const Broken& b : broken_plugins()) {
    CAPTURE(b.scenario);
    CHECK(find_plugin(registry, b.file) == nullptr);
    const encgraph::RejectedPlugin* r = find_rejected(registry, b.path());
    REQUIRE(r != nullptr);
    for (const auto& reason : b.reasons) CHECK(contains(r->reason, reason));
  }

  SUBCASE("of two files with one name the first found wins, the other names both") {
    const encgraph::LoadedPlugin* dup = find_plugin(registry, "loader_dup");
    REQUIRE(dup != nullptr);
    CHECK(dup->file == plugin_file("duplicate", "loader_dup_a"));
    const encgraph::RejectedPlugin* r =
        find_rejected(registry, plugin_file("duplicate", "loader_dup_b"));
    REQUIRE(r != nullptr);
    CHECK(contains(r->reason, "duplicate plugin name 'loader_dup'"));
    CHECK(contains(r->reason, plugin_file("duplicate", "loader_dup_a").string()));
  }

  SUBCASE("asking for a rejected plugin by name explains the rejection") {
    try {
      registry.get("loader_wrong_major");
      FAIL("get() of a rejected plugin succeeded");
    } catch (const Error& e) {
      const std::string m = e.what();
      CAPTURE(m);
      CHECK(e.kind() == ErrorKind::Plugin);
      CHECK(contains(m, "plugin 'loader_wrong_major' not found"));
      CHECK(contains(m, plugin_file("wrong_major", "loader_wrong_major").string() +
                            " was rejected: built for plugin ABI 2.0"));
    }
  }
}

TEST_CASE("get() of a missing name names every searched directory") {
  const std::vector<fs::path> dirs = {dir("valid"), dir("text")};
  const PluginRegistry registry(dirs);
  try {
    registry.get("no_such_plugin");
    FAIL("get() of a missing plugin succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(e.kind() == ErrorKind::Config);  // a name nothing provides: fix the config
    CHECK(contains(m, "plugin 'no_such_plugin' not found"));
    for (const auto& d : registry.search_path()) CHECK(contains(m, d.string()));
    CHECK(contains(m, dir("valid").string()));
    CHECK(contains(m, dir("text").string()));
    CHECK(contains(m, "Available:"));
    CHECK(contains(m, "loader_ok"));
    CHECK(contains(m, "--plugin-dir or ENCGRAPH_PLUGIN_PATH"));
  }
}

TEST_CASE("ENCGRAPH_PLUGIN_PATH is searched after the configured directories") {
  SUBCASE("without it the test plugins are invisible (they are not in the build plugin dir)") {
    const ScopedPluginPath env(std::nullopt);
    const PluginRegistry registry;
    CHECK(find_plugin(registry, "loader_ok") == nullptr);
    for (const auto& d : registry.search_path()) CHECK_FALSE(contains(d.string(), kRoot.string()));
  }
  SUBCASE("its colon-separated entries follow the configured directories, in order") {
    const ScopedPluginPath env(":" + dir("valid").string() + "::" + dir("wrong_major").string());
    const std::vector<fs::path> path = encgraph::plugin_search_path({dir("shadow")});
    REQUIRE(path.size() >= 3);
    CHECK(path[0] == dir("shadow"));
    CHECK(path[1] == dir("valid"));
    CHECK(path[2] == dir("wrong_major"));
    CHECK(std::count(path.begin(), path.end(), fs::path()) == 0);  // empty entries skipped
  }
  SUBCASE("a plugin found only through it loads") {
    const ScopedPluginPath env(dir("valid").string());
    const PluginRegistry registry;
    const encgraph::LoadedPlugin* ok = find_plugin(registry, "loader_ok");
    REQUIRE(ok != nullptr);
    CHECK(ok->version == "1.2.3");
  }
  SUBCASE("a configured directory wins over it for the same name") {
    const ScopedPluginPath env(dir("valid").string());
    const PluginRegistry registry({dir("shadow")});
    const encgraph::LoadedPlugin* ok = find_plugin(registry, "loader_ok");
    REQUIRE(ok != nullptr);
    CHECK(ok->version == "2.0.0-shadow");
    const encgraph::RejectedPlugin* r = find_rejected(registry, plugin_file("valid", "loader_ok"));
    REQUIRE(r != nullptr);
    CHECK(contains(r->reason, "duplicate plugin name 'loader_ok': already provided by " +
                                  plugin_file("shadow", "loader_ok_shadow").string()));
  }
}

TEST_CASE("an exception escaping create becomes a clear error, and the process goes on") {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = "loader_create_throws";
  cfg.plugin_dirs = {dir("create_throws")};
  cfg.device = "cpu";
  try {
    encgraph::Runtime runtime(cfg);
    FAIL("a plugin whose create throws produced a runtime");
  } catch (const Error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(e.kind() == ErrorKind::Plugin);
    CHECK(contains(m, "plugin 'loader_create_throws': create let a C++ exception escape"));
    CHECK(contains(m, "ABI violation"));
  }
}

TEST_CASE("the valid test plugin captures and runs on the CPU") {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = "loader_ok";
  cfg.plugin_dirs = {dir("valid")};
  cfg.device = "cpu";
  encgraph::Runtime runtime(cfg);
  runtime.capture();
  REQUIRE(runtime.is_captured());
  std::vector<encgraph::Item> items;
  for (int64_t rows : {3, 5}) {
    eg_item_desc desc{};
    desc.modality = EG_MODALITY_IMAGE;
    desc.height = rows;
    desc.width = 1;
    desc.frames = 1;
    desc.seed = static_cast<uint64_t>(rows);
    items.push_back(runtime.make_item(desc));
  }
  const encgraph::Result result = runtime.execute(items);
  REQUIRE(result.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t rows = i == 0 ? 3 : 5;
    REQUIRE(result.rows(i) == rows);
    const std::vector<float> v = result.item_as_float(i);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        const float x = static_cast<float>(rows) + static_cast<float>(r) + c / 10.0f;
        CHECK(v[r * 4 + c] == doctest::Approx(2.0f * x + 1.0f));
      }
  }
  CHECK(runtime.stats().graph_hits == 2);
}

TEST_CASE("only the entry symbol is exported from a plugin built by encgraph_add_plugin") {
  const auto [status, out] =
      run("nm -D --defined-only " + quoted(plugin_file("valid", "loader_ok")));
  REQUIRE(status == 0);
  CAPTURE(out);
  int defined = 0;
  for (size_t pos = 0; (pos = out.find('\n', pos)) != std::string::npos; ++pos) ++defined;
  CHECK(contains(out, " T encgraph_plugin_entry"));
  CHECK(defined == 1);
}

TEST_CASE("`encgraph plugins --plugin-dir` lists the valid plugin and explains each broken one") {
  std::string command = quoted(ENCGRAPH_EXE) + " plugins";
  for (const auto& d : all_dirs()) command += " --plugin-dir " + quoted(d);
  const auto [status, out] = run(command);
  CAPTURE(out);
  CHECK(status == 0);
  CHECK(contains(out, "loader_ok  version 1.2.3  abi " + kRuntimeAbi +
                          "  modalities image  devices cpu  " +
                          plugin_file("valid", "loader_ok").string()));
  const size_t rejected = out.find("\nrejected (");
  REQUIRE(rejected != std::string::npos);
  const std::string reasons = out.substr(rejected);  // the warnings above repeat them
  for (const Broken& b : broken_plugins()) {
    CAPTURE(b.scenario);
    CHECK(contains(reasons, "  " + b.path().string() + ": "));
    for (const auto& reason : b.reasons) CHECK(contains(reasons, reason));
  }
  CHECK(contains(reasons, plugin_file("duplicate", "loader_dup_b").string() +
                              ": duplicate plugin name 'loader_dup'"));
  // A declining plugin explains itself through the host's log service.
  CHECK(contains(out, "[loader_entry_null] declining on purpose"));
}

TEST_CASE("`encgraph plugins` without --plugin-dir never sees the test plugins") {
  const ScopedPluginPath env(std::nullopt);
  const auto [status, out] = run(quoted(ENCGRAPH_EXE) + " plugins");
  CAPTURE(out);
  CHECK(status == 0);
  CHECK_FALSE(contains(out, kRoot.string()));
}
