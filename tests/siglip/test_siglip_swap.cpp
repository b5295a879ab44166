// Model swap by configuration alone: the one encgraph binary of this build runs
// configs/siglip_small_cpu.toml and configs/qwen2_5_vl_small_cpu.toml, and each
// run's report and embeddings come from the plugin its config names, with that
// model's output shapes. Nothing is rebuilt between the two runs.
#include "siglip_test_support.hpp"

#include <encoder_kit/json.hpp>
#include <encoder_kit/safetensors.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;

// The build's binary; on the GPU machine the bundle keeps it beside this test.
fs::path encgraph_binary() {
  if (fs::exists(ENCGRAPH_BINARY)) return ENCGRAPH_BINARY;
  return fs::read_symlink("/proc/self/exe").parent_path() / "encgraph";
}

// The repository's configs/ (the bundle runs from the repository root).
fs::path config_file(const std::string& name) {
  const fs::path in_tree = fs::path(ENCGRAPH_SOURCE_DIR) / "configs" / name;
  return fs::exists(in_tree) ? in_tree : fs::current_path() / "configs" / name;
}

// One shell word (the paths here hold no quote).
std::string quote(const std::string& s) {
  std::string q(1, '\'');
  q.append(s).push_back('\'');
  return q;
}

struct Run {
  int code = -1;
  std::string output;
};

Run run_binary(const std::vector<std::string>& args) {
  std::string cmd = quote(encgraph_binary().string());
  for (const std::string& a : args) cmd.append(" ").append(quote(a));
  cmd.append(" 2>&1");
  Run r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

encoder_kit::Json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return encoder_kit::Json::parse(ss.str(), path.string());
}

struct Model {
  const char* config;
  const char* plugin;
  int64_t hidden;         // out_hidden_size
  int64_t rows_per_item;  // 0: varies with the item's size
};

}  // namespace

TEST_CASE("one encgraph binary runs SigLIP and Qwen2.5-VL, chosen by the config alone") {
  REQUIRE_MESSAGE(fs::exists(encgraph_binary()), encgraph_binary().string());
  const std::string plugin_dirs =
      "runtime.plugin_dirs=[\"" + std::string(ENCGRAPH_TEST_PLUGIN_DIR) + "\"]";
  // The values configs/siglip_small_cpu.toml and qwen2_5_vl_small_cpu.toml set.
  const Model models[] = {{"siglip_small_cpu.toml", "siglip", 64, 64},
                          {"qwen2_5_vl_small_cpu.toml", "qwen2_5_vl", 96, 0}};
  siglip_test::TempDir dir("siglip-swap");
  for (const Model& m : models) {
    CAPTURE(m.config);
    const fs::path report = dir.path() / (std::string(m.plugin) + ".json");
    const fs::path embeddings = dir.path() / (std::string(m.plugin) + ".safetensors");
    const Run r =
        run_binary({"run", "--config", config_file(m.config).string(), "--set", plugin_dirs,
                    "--set", "workload.count=6", "--set", "output.report=" + report.string(),
                    "--set", "output.embeddings=" + embeddings.string()});
    INFO(r.output);
    REQUIRE(r.code == 0);
    const encoder_kit::Json j = read_json(report);
    const encoder_kit::Json* plugin = j.find("plugin");
    REQUIRE(plugin != nullptr);
    CHECK(plugin->find("name")->as_string("name") == m.plugin);
    CHECK(plugin->find("out_hidden_size")->as_int("out_hidden_size") == m.hidden);
    const encoder_kit::SafetensorsFile file(embeddings);
    const std::vector<std::string> names = file.names();
    CHECK(names.size() == 6);
    for (const std::string& n : names) {
      const encoder_kit::TensorRef* t = file.find(n);
      REQUIRE(t != nullptr);
      REQUIRE(t->shape.size() == 2);
      CHECK(t->shape[1] == m.hidden);
      if (m.rows_per_item) CHECK(t->shape[0] == m.rows_per_item);
    }
  }
  // Both plugins sit side by side in the folder the binary searches.
  const Run list = run_binary({"plugins", "--plugin-dir", ENCGRAPH_TEST_PLUGIN_DIR});
  CHECK(list.code == 0);
  CHECK(list.output.find("siglip") != std::string::npos);
  CHECK(list.output.find("qwen2_5_vl") != std::string::npos);
}
