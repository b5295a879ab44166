// Plugin discovery and ABI checks against real plugins built by this suite: one
// valid, one per way a plugin can be broken (including libraries that abort,
// fault or hang while loading), and damaged copies made here (truncated, foreign
// architecture, 32-bit, empty, not a file). Every broken file must produce its
// own error naming the file and the reason, none may take the process down, and
// asking for one plugin by name must open no other file.
#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include "elf_check.hpp"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
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
      {"huge_table",
       "loader_huge_table",
       {"plugin table claims 2147418112 bytes", "a garbage size"}},
      {"missing_function", "loader_missing_function", {"required function 'forward' is NULL"}},
      {"no_capture_inputs",
       "loader_no_capture_inputs",
       {"provide prepare_capture_staging (1.1) or prepare_capture_inputs",
        "prepare_capture_inputs and prepare_capture_staging are both NULL"}},
      {"entry_throws",
       "loader_entry_throws",
       {"entry function threw an exception", "no exception may cross the C boundary"}},
      {"entry_null", "loader_entry_null", {"entry function returned no table"}},
      {"bad_name", "loader_bad_name", {"plugin name 'bad/name' is invalid", "no path separators"}},
      {"name_mismatch",
       "loader_mismatch",
       {"declares the plugin name 'loader_declared_other'",
        "its file name stands for 'loader_mismatch'",
        "rename the file to libencgraph_loader_declared_other.so"}},
      {"no_entry", "loader_no_entry", {"does not export the entry symbol 'encgraph_plugin_entry'"}},
      {"unresolved", "loader_unresolved", {"could not be loaded", "eg_test_symbol_nobody_defines"}},
      {"text", "text", {"not a shared library (no ELF header)"}},
      {"ctor_abort",
       "loader_ctor_abort",
       {"killed the probe process with SIGABRT", "loading it (dlopen: its constructors",
        "fix the plugin or remove the file"}},
      {"ctor_exit",
       "loader_ctor_exit",
       {"ended the probe process with exit status 7", "called exit()"}},
      {"entry_segv",
       "loader_entry_segv",
       {"its entry function (encgraph_plugin_entry) killed the probe process with SIGSEGV",
        "the entry function crashed"}},
      {"entry_garbage",
       "loader_entry_garbage",
       {"reading the table its entry function returned killed the probe process with SIGSEGV",
        "not a valid plugin table"}},
      {"name_garbage",
       "loader_name_garbage",
       {"reading the strings its table points to killed the probe process with SIGSEGV",
        "a pointer to no string"}},
  };
  return all;
}

// Every scenario folder, for registry and CLI runs that see all of them at once.
std::vector<fs::path> all_dirs() {
  std::vector<fs::path> dirs = {dir("valid"), dir("create_throws")};
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

// Sets an environment variable (or unsets it for nullopt) and restores it on exit.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) {
    if (value)
      setenv(name_.c_str(), value->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  std::string name_;
  std::optional<std::string> old_;
};

struct ScopedPluginPath : ScopedEnv {
  explicit ScopedPluginPath(const std::optional<std::string>& value)
      : ScopedEnv("ENCGRAPH_PLUGIN_PATH", value) {}
};

const encgraph::PluginInfo* find_plugin(const encgraph::PluginSurvey& s, const std::string& name) {
  for (const auto& p : s.plugins)
    if (p.name == name) return &p;
  return nullptr;
}

const encgraph::RejectedPlugin* find_rejected(const encgraph::PluginSurvey& s,
                                              const fs::path& file) {
  for (const auto& x : s.rejected)
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

// A scratch folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "encgraph-loader-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// The valid test plugin's bytes, to damage copies of.
std::string valid_bytes() {
  const std::string bytes = read_bytes(plugin_file("valid", "loader_ok"));
  REQUIRE(bytes.size() > sizeof(Elf64_Ehdr));
  return bytes;
}

// The file offset just past the end of the valid plugin's last loadable segment.
uint64_t end_of_loadable(const std::string& elf) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  uint64_t end = 0;
  for (int k = 0; k < eh.e_phnum; ++k) {
    Elf64_Phdr ph;
    std::memcpy(&ph, elf.data() + eh.e_phoff + k * sizeof(ph), sizeof(ph));
    if (ph.p_type == PT_LOAD) end = std::max<uint64_t>(end, ph.p_offset + ph.p_filesz);
  }
  return end;
}

std::string error_of(const std::function<void()>& fn, ErrorKind expected) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == expected);
    return e.what();
  }
  FAIL("no error was thrown");
  return {};
}

int lines_in(const fs::path& file) {
  const std::string text = read_bytes(file);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
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
  CHECK(contains(message, "libencgraph_absent.so: does not exist"));
}

TEST_CASE("the ELF header is checked before anything loads the file") {
  const TempDir tmp;
  const std::string good = valid_bytes();
  auto check_copy = [&](const std::string& name, const std::string& bytes,
                        const std::vector<std::string>& reasons) {
    CAPTURE(name);
    const fs::path file = tmp / ("libencgraph_" + name + ".so");
    write_bytes(file, bytes);
    const std::string message = load_error(file);
    CAPTURE(message);
    CHECK(message.rfind(file.string() + ": ", 0) == 0);
    for (const auto& r : reasons) CHECK(contains(message, r));
    CHECK(encgraph::elf_problem(file) == message.substr(file.string().size() + 2));
  };

  SUBCASE("a valid plugin passes") {
    CHECK(encgraph::elf_problem(plugin_file("valid", "loader_ok")).empty());
  }
  SUBCASE("an empty file") {
    check_copy("empty", "", {"is empty (0 bytes)", "copy it again"});
  }
  SUBCASE("three bytes") {
    check_copy("tiny",
               "\x7f"
               "EL",
               {"no ELF header"});
  }
  SUBCASE("an ELF identification and nothing more") {
    check_copy("ident", good.substr(0, 10),
               {"truncated: its ELF identification ends at byte 16", "the file has 10 bytes"});
  }
  SUBCASE("a 32-bit ELF header") {
    std::string b = good;
    b[EI_CLASS] = ELFCLASS32;
    check_copy(
        "elf32", b,
        {"a 32-bit ELF file (ELFCLASS32)", "64-bit plugins only", "rebuild the plugin for x86-64"});
  }
  SUBCASE("a big-endian ELF header") {
    std::string b = good;
    b[EI_DATA] = ELFDATA2MSB;
    check_copy("big_endian", b, {"a big-endian ELF file", "little-endian"});
  }
  SUBCASE("another architecture is named as such") {
    std::string b = good;
    const uint16_t aarch64 = EM_AARCH64;
    std::memcpy(b.data() + offsetof(Elf64_Ehdr, e_machine), &aarch64, 2);
    check_copy("aarch64", b,
               {"built for AArch64 (e_machine 183); this machine is x86-64: "
                "rebuild the plugin for x86-64"});
  }
  SUBCASE("an executable, not a shared library") {
    std::string b = good;
    const uint16_t exec = ET_EXEC;
    std::memcpy(b.data() + offsetof(Elf64_Ehdr, e_type), &exec, 2);
    check_copy("exec", b, {"an executable (ET_EXEC)", "build it as a shared library"});
  }
  SUBCASE("a copy cut inside its loadable segments (dlopen would SIGBUS)") {
    const uint64_t end = end_of_loadable(good);
    REQUIRE(end > 4096);
    // Keep the section header table inside the cut copy, so the segment check speaks.
    std::string b = good.substr(0, end - 100);
    Elf64_Ehdr eh;
    std::memcpy(&eh, b.data(), sizeof(eh));
    eh.e_shoff = 0;
    eh.e_shnum = 0;
    std::memcpy(b.data(), &eh, sizeof(eh));
    check_copy("cut_segment", b,
               {"truncated: its loadable segment",
                "the file has " + std::to_string(end - 100) + " bytes", "copy it again"});
  }
  SUBCASE("a copy cut in half") {
    check_copy("half", good.substr(0, good.size() / 2), {"truncated:", "copy it again"});
  }
  SUBCASE("a copy cut just after the header") {
    check_copy("header_only", good.substr(0, sizeof(Elf64_Ehdr)),
               {"truncated: its program header table ends at byte"});
  }
  SUBCASE("a copy missing its last byte") {
    check_copy("minus_one", good.substr(0, good.size() - 1),
               {"truncated: its section header table ends at byte " + std::to_string(good.size())});
  }
  SUBCASE("garbage after a valid ELF magic") {
    check_copy("garbage",
               std::string("\x7f"
                           "ELF") +
                   std::string(200, '\xff'),
               {"an ELF file of unknown class 255"});
  }
}

TEST_CASE("what is not a regular file is named for what it is") {
  const TempDir tmp;
  SUBCASE("a directory") {
    fs::create_directory(tmp / "libencgraph_dir.so");
    CHECK(contains(load_error(tmp / "libencgraph_dir.so"), "is a directory, not a shared library"));
  }
  SUBCASE("a FIFO does not block") {
    REQUIRE(::mkfifo((tmp / "libencgraph_fifo.so").c_str(), 0600) == 0);
    CHECK(contains(load_error(tmp / "libencgraph_fifo.so"), "is a FIFO (named pipe)"));
  }
  SUBCASE("a dangling symbolic link") {
    fs::create_symlink(tmp / "nowhere.so", tmp / "libencgraph_dangling.so");
    const std::string m = load_error(tmp / "libencgraph_dangling.so");
    CHECK(contains(m, "a symbolic link to '" + (tmp / "nowhere.so").string() +
                          "', which does not exist (dangling)"));
  }
  SUBCASE("a symbolic link to a valid plugin loads") {
    fs::create_symlink(plugin_file("valid", "loader_ok"), tmp / "libencgraph_loader_ok.so");
    CHECK(encgraph::load_plugin_file(tmp / "libencgraph_loader_ok.so").name == "loader_ok");
  }
  SUBCASE("a device node") {
    CHECK(contains(encgraph::elf_problem("/dev/null"), "is a device node"));
  }
}

TEST_CASE("this build's machine is x86-64 on x86-64") {
#if defined(__x86_64__)
  CHECK(encgraph::this_elf_machine() == EM_X86_64);
#endif
  CHECK(encgraph::elf_machine_name(EM_AARCH64) == "AArch64");
  CHECK(encgraph::elf_machine_name(EM_X86_64) == "x86-64");
  CHECK(encgraph::elf_machine_name(4242) == "machine 4242");
}

TEST_CASE("a hanging plugin is killed after the probe timeout") {
  const ScopedEnv timeout("ENCGRAPH_PLUGIN_PROBE_TIMEOUT", "0.5");
  const auto start = std::chrono::steady_clock::now();
  const std::string m = load_error(plugin_file("entry_hang", "loader_entry_hang"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CAPTURE(m);
  CHECK(contains(m, "its entry function (encgraph_plugin_entry) did not finish within 0.5 s"));
  CHECK(contains(m, "raise ENCGRAPH_PLUGIN_PROBE_TIMEOUT"));
  CHECK(elapsed < std::chrono::seconds(4));
}

TEST_CASE("malformed probe settings are configuration errors naming the variable") {
  SUBCASE("ENCGRAPH_PLUGIN_PROBE") {
    const ScopedEnv probe("ENCGRAPH_PLUGIN_PROBE", "maybe");
    const std::string m = error_of(
        [] { encgraph::load_plugin_file(plugin_file("wrong_major", "loader_wrong_major")); },
        ErrorKind::Config);
    CHECK(contains(m, "ENCGRAPH_PLUGIN_PROBE='maybe': use 1"));
  }
  for (const char* bad : {"0", "-1", "abc", "1e9", "nan", ""}) {
    CAPTURE(bad);
    const ScopedEnv timeout("ENCGRAPH_PLUGIN_PROBE_TIMEOUT", std::string(bad));
    const std::string m = error_of(
        [] { encgraph::load_plugin_file(plugin_file("short_table", "loader_short_table")); },
        ErrorKind::Config);
    CHECK(contains(m, "ENCGRAPH_PLUGIN_PROBE_TIMEOUT='" + std::string(bad) + "'"));
  }
}

TEST_CASE("plugin.name loads only the file its name maps to") {
  const TempDir tmp;
  const ScopedEnv canary("LOADER_TEST_CANARY", (tmp / "canary.log").string());
  std::vector<fs::path> dirs = {dir("canary")};
  for (const auto& d : all_dirs()) dirs.push_back(d);
  const PluginRegistry registry(dirs);

  SUBCASE("a good plugin loads beside files that abort, fault, hang and lie") {
    const encgraph::LoadedPlugin& p = registry.get("loader_ok");
    CHECK(p.file == plugin_file("valid", "loader_ok"));
    CHECK(p.version == "1.2.3");
    CHECK_FALSE(fs::exists(tmp / "canary.log"));  // no other library ran
  }
  SUBCASE("a runtime starts beside them and never runs the others") {
    encgraph::RuntimeConfig cfg;
    cfg.plugin = "loader_ok";
    cfg.plugin_dirs = dirs;
    cfg.device = "cpu";
    encgraph::Runtime runtime(cfg);
    CHECK_FALSE(fs::exists(tmp / "canary.log"));
  }
  SUBCASE("find() maps names to files without opening them") {
    CHECK(registry.find("loader_ctor_abort") == plugin_file("ctor_abort", "loader_ctor_abort"));
    CHECK(registry.find("loader_canary") == plugin_file("canary", "loader_canary"));
    CHECK_FALSE(registry.find("loader_dup"));
    CHECK_FALSE(registry.find("../valid/libencgraph_loader_ok"));
    CHECK_FALSE(fs::exists(tmp / "canary.log"));
  }
  SUBCASE("a crashing plugin asked for by name is a plugin error, not a crash") {
    const std::string m = error_of([&] { registry.get("loader_ctor_abort"); }, ErrorKind::Plugin);
    CHECK(contains(m, plugin_file("ctor_abort", "loader_ctor_abort").string() + ": "));
    CHECK(contains(m, "killed the probe process with SIGABRT"));
  }
  SUBCASE("a name no file has is a config error naming dirs and available names") {
    const std::string m = error_of([&] { registry.get("loader_dup"); }, ErrorKind::Config);
    CHECK(contains(m, "plugin 'loader_dup' not found: no libencgraph_loader_dup.so"));
    CHECK(contains(m, "Available: loader_canary loader_ok loader_create_throws"));
    CHECK(contains(m, "loader_ctor_abort"));  // names come from file names: nothing was loaded
    CHECK_FALSE(fs::exists(tmp / "canary.log"));
  }
  SUBCASE("an invalid name is a config error") {
    const std::string m = error_of([&] { registry.get("../x"); }, ErrorKind::Config);
    CHECK(contains(m, "plugin name '../x' is invalid"));
  }
  SUBCASE("the canary itself loads once in the probe and once here") {
    CHECK(registry.get("loader_canary").name == "loader_canary");
    CHECK(lines_in(tmp / "canary.log") == 2);
    registry.get("loader_canary");  // a loaded plugin is not loaded again
    CHECK(lines_in(tmp / "canary.log") == 2);
  }
}

TEST_CASE("ENCGRAPH_PLUGIN_PROBE=0 loads without the probe process") {
  const TempDir tmp;
  const ScopedEnv canary("LOADER_TEST_CANARY", (tmp / "canary.log").string());
  const ScopedEnv probe("ENCGRAPH_PLUGIN_PROBE", "0");
  // A copy: the suite's canary may already be loaded in this process.
  fs::copy_file(plugin_file("canary", "loader_canary"), tmp / "libencgraph_loader_canary.so");
  const PluginRegistry registry({tmp.path()});
  CHECK(registry.get("loader_canary").file == tmp / "libencgraph_loader_canary.so");
  CHECK(lines_in(tmp / "canary.log") == 1);
  // The checks on the table still hold.
  CHECK(contains(load_error(plugin_file("wrong_major", "loader_wrong_major")),
                 "built for plugin ABI 2.0"));
  CHECK(contains(load_error(plugin_file("name_mismatch", "loader_mismatch")),
                 "declares the plugin name 'loader_declared_other'"));
}

TEST_CASE("the survey lists the valid plugins and rejects each broken one with its reason") {
  const PluginRegistry registry(all_dirs());
  const encgraph::PluginSurvey survey = registry.survey();
  const encgraph::PluginInfo* ok = find_plugin(survey, "loader_ok");
  REQUIRE(ok != nullptr);
  CHECK(ok->file == plugin_file("valid", "loader_ok"));
  CHECK(ok->version == "1.2.3");
  CHECK(ok->devices == EG_DEVICE_CPU);
  CHECK(ok->modalities == EG_MODALITY_IMAGE);
  // create throws only when an instance is made: the file itself is a valid plugin.
  CHECK(find_plugin(survey, "loader_create_throws") != nullptr);
  // Beside those, only the build tree's plugin folder (which the search path ends with).
  for (const auto& p : survey.plugins)
    if (p.name != "loader_ok" && p.name != "loader_create_throws")
      CHECK_FALSE(contains(p.file.string(), kRoot.string()));

  for (const Broken& b : broken_plugins()) {
    CAPTURE(b.scenario);
    CHECK(find_plugin(survey, b.file) == nullptr);
    const encgraph::RejectedPlugin* r = find_rejected(survey, b.path());
    REQUIRE(r != nullptr);
    for (const auto& reason : b.reasons) CHECK(contains(r->reason, reason));
  }
  CHECK(survey.rejected.size() == broken_plugins().size());
}

TEST_CASE("the survey of damaged files and odd entries never fails") {
  const TempDir tmp;
  const std::string good = valid_bytes();
  write_bytes(tmp / "libencgraph_empty.so", "");
  write_bytes(tmp / "libencgraph_half.so", good.substr(0, good.size() / 2));
  fs::create_directory(tmp / "libencgraph_dir.so");
  REQUIRE(::mkfifo((tmp / "libencgraph_fifo.so").c_str(), 0600) == 0);
  fs::create_symlink(tmp / "nowhere.so", tmp / "libencgraph_dangling.so");
  write_bytes(tmp / "libencgraph_.so", good);
  write_bytes(tmp / "libencgraph_a b.so", good);
  write_bytes(tmp / "README.txt", "not a candidate");
  fs::copy_file(plugin_file("valid", "loader_ok"), tmp / "libencgraph_loader_ok.so");

  const encgraph::PluginSurvey survey = PluginRegistry({tmp.path()}).survey();
  const encgraph::PluginInfo* ok = find_plugin(survey, "loader_ok");
  REQUIRE(ok != nullptr);
  CHECK(ok->file == tmp / "libencgraph_loader_ok.so");
  auto reason = [&](const std::string& f) {
    const encgraph::RejectedPlugin* r = find_rejected(survey, tmp / f);
    REQUIRE_MESSAGE(r != nullptr, f);
    return r->reason;
  };
  CHECK(contains(reason("libencgraph_empty.so"), "is empty"));
  CHECK(contains(reason("libencgraph_half.so"), "truncated"));
  CHECK(contains(reason("libencgraph_dir.so"), "is a directory"));
  CHECK(contains(reason("libencgraph_fifo.so"), "is a FIFO"));
  CHECK(contains(reason("libencgraph_dangling.so"), "dangling"));
  CHECK(contains(reason("libencgraph_.so"), "stands for the plugin name '', which is invalid"));
  CHECK(contains(reason("libencgraph_a b.so"), "stands for the plugin name 'a b'"));
  CHECK(std::count_if(survey.rejected.begin(), survey.rejected.end(),
                      [&](const auto& r) { return r.file.parent_path() == tmp.path(); }) == 7);
}

TEST_CASE("get() of a missing name names every searched directory") {
  const std::vector<fs::path> dirs = {dir("valid"), dir("text")};
  const PluginRegistry registry(dirs);
  const std::string m = error_of([&] { registry.get("no_such_plugin"); }, ErrorKind::Config);
  CAPTURE(m);
  CHECK(contains(m, "plugin 'no_such_plugin' not found"));
  for (const auto& d : registry.search_path()) CHECK(contains(m, d.string()));
  CHECK(contains(m, dir("valid").string()));
  CHECK(contains(m, dir("text").string()));
  CHECK(contains(m, "Available: loader_ok text"));
  CHECK(contains(m, "--plugin-dir or ENCGRAPH_PLUGIN_PATH"));
}

TEST_CASE("asking for a broken plugin by name explains the rejection") {
  const PluginRegistry registry(all_dirs());
  const std::string m = error_of([&] { registry.get("loader_wrong_major"); }, ErrorKind::Plugin);
  CHECK(contains(
      m, plugin_file("wrong_major", "loader_wrong_major").string() + ": built for plugin ABI 2.0"));
  const std::string t = error_of([&] { registry.get("text"); }, ErrorKind::Plugin);
  CHECK(contains(t, "no ELF header"));
}

TEST_CASE("ENCGRAPH_PLUGIN_PATH is searched after the configured directories") {
  SUBCASE("without it the test plugins are invisible (they are not in the build plugin dir)") {
    const ScopedPluginPath env(std::nullopt);
    const PluginRegistry registry;
    CHECK_FALSE(registry.find("loader_ok"));
    CHECK(find_plugin(registry.survey(), "loader_ok") == nullptr);
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
    CHECK(registry.get("loader_ok").version == "1.2.3");
  }
  SUBCASE("an earlier directory wins over it for the same file name") {
    const ScopedPluginPath env(dir("valid").string());
    const PluginRegistry registry({dir("shadow")});
    const encgraph::LoadedPlugin& ok = registry.get("loader_ok");
    CHECK(ok.version == "2.0.0-shadow");
    CHECK(ok.file == plugin_file("shadow", "loader_ok"));
    const encgraph::PluginSurvey survey = registry.survey();
    const encgraph::PluginInfo* listed = find_plugin(survey, "loader_ok");
    REQUIRE(listed != nullptr);
    CHECK(listed->version == "2.0.0-shadow");
    const encgraph::RejectedPlugin* r = find_rejected(survey, plugin_file("valid", "loader_ok"));
    REQUIRE(r != nullptr);
    CHECK(contains(r->reason, "duplicate plugin name 'loader_ok': already provided by " +
                                  plugin_file("shadow", "loader_ok").string()));
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
    // Before 1.2 the spec comes from a synthetic item: no table entry is read.
    const eg_item_spec spec = runtime.spec_for(desc);
    CHECK(spec.output_tokens == items.back().spec().output_tokens);
    CHECK(spec.path_tokens[0] == items.back().spec().path_tokens[0]);
    CHECK(spec.input_size == items.back().spec().input_size);
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

namespace {

// Captures and runs items of 3 and 5 rows through the plugin in `scenario`; the
// test plugin's rows are 2 x + 1 of its inputs.
void check_runs(const std::string& scenario, const std::string& name) {
  encgraph::RuntimeConfig cfg;
  cfg.plugin = name;
  cfg.plugin_dirs = {dir(scenario)};
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
    // Before 1.2 the spec comes from a synthetic item: no table entry is read.
    const eg_item_spec spec = runtime.spec_for(desc);
    CHECK(spec.output_tokens == items.back().spec().output_tokens);
    CHECK(spec.path_tokens[0] == items.back().spec().path_tokens[0]);
    CHECK(spec.input_size == items.back().spec().input_size);
  }
  const encgraph::Result result = runtime.execute(items);
  REQUIRE(result.size() == 2);
  REQUIRE(result.num_outputs() == 1);
  CHECK(result.output(0).name == "embeddings");
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

}  // namespace

TEST_CASE("a 1.0-size table loads and runs; the garbage past its size is never touched") {
  const encgraph::LoadedPlugin p =
      encgraph::load_plugin_file(plugin_file("v1_0_table", "loader_v1_0"));
  CHECK(p.abi_minor == 0);
  REQUIRE(p.api != nullptr);
  CHECK(p.api->struct_size == EG_PLUGIN_API_V1_0_SIZE);
  check_runs("v1_0_table", "loader_v1_0");
}

TEST_CASE("a 1.1-size table loads and runs; the 1.2 entry past its size is never touched") {
  const encgraph::LoadedPlugin p =
      encgraph::load_plugin_file(plugin_file("v1_1_table", "loader_v1_1"));
  CHECK(p.abi_minor == 1);
  REQUIRE(p.api != nullptr);
  CHECK(p.api->struct_size == EG_PLUGIN_API_V1_1_SIZE);
  check_runs("v1_1_table", "loader_v1_1");
}

TEST_CASE("a 1.1 table with host-staged capture inputs needs no prepare_capture_inputs") {
  const encgraph::LoadedPlugin p =
      encgraph::load_plugin_file(plugin_file("staging", "loader_staging"));
  REQUIRE(p.api != nullptr);
  CHECK(!p.api->prepare_capture_inputs);
  check_runs("staging", "loader_staging");
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
  // It survives libraries that abort, fault and hang (killed at the probe timeout).
  std::string command = "ENCGRAPH_PLUGIN_PROBE_TIMEOUT=1 " + quoted(ENCGRAPH_EXE) + " plugins";
  for (const auto& d : all_dirs()) command += " --plugin-dir " + quoted(d);
  command += " --plugin-dir " + quoted(dir("entry_hang"));
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
  CHECK(contains(reasons, plugin_file("entry_hang", "loader_entry_hang").string() +
                              ": its entry function (encgraph_plugin_entry) did not finish"));
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
