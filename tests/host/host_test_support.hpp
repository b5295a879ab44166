// Helpers of the host's test suites: a scratch folder, capturing what a
// command prints, a config naming the in-tree toy plugin, and catching a
// Config error's message.
#pragma once

#include "commands.hpp"
#include "config.hpp"

#include <encgraph/error.hpp>

#include <doctest/doctest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace host_test {

namespace fs = std::filesystem;

// A fresh folder, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("encgraph-host-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return path_ / name;
  }

 private:
  fs::path path_;
};

// A file's bytes.
inline std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every name in `dir`, sorted: staging files left behind would show here.
inline std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string plugin_dir() {
  return EG_HOST_PLUGIN_DIR;
}

// The build's test plugins (never installed, so apart from the user's folder):
// the ABI conformance plugin's names and verify's mistakes plugin.
inline std::string test_plugin_dir() {
  return EG_HOST_TEST_PLUGIN_DIR;
}

// A runtime.plugin_dirs value that finds the shipped and the test plugins.
inline std::string plugin_dirs_with_tests() {
  return "[\"" + plugin_dir() + "\", \"" + test_plugin_dir() + "\"]";
}

// A config whose plugin is the in-tree toy, found in the build's plugin folder.
// Timing-based eager choices are off: hit counts stay exact.
inline std::string toy_config(const std::string& extra = "") {
  return "[runtime]\ndevice = \"cpu\"\nlog_level = \"warn\"\nprefer_faster_path = false\n"
         "plugin_dirs = [\"" +
         plugin_dir() + "\"]\n\n[plugin]\nname = \"toy\"\n\n[plugin.config]\nhidden = 8\n\n" +
         extra;
}

// What a command writes on stdout and logs, and its exit code.
struct Outcome {
  int code = -1;
  std::string out;
  std::string log;
};

inline Outcome run(const std::string& command, const std::vector<std::string>& args) {
  std::ostringstream out, log;
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());
  Outcome o;
  o.code = encgraph::host::run_subcommand(command, args);
  std::cout.rdbuf(old);
  spdlog::set_default_logger(previous);
  o.out = out.str();
  o.log = log.str();
  return o;
}

// The message of the Config error loading `text` throws ("" when none).
inline std::string config_error(const std::string& text,
                                const std::vector<std::string>& overrides = {}) {
  try {
    encgraph::host::load_config_text(text, "t.toml", overrides);
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Config);
    return e.what();
  }
  return "";
}

}  // namespace host_test
