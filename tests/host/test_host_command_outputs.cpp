// What a command counts as its inputs and outputs: the config, the plugin's
// weights and path-valued settings, the trace, every image and frame; and the
// checks made on them before any work.
#include "command_outputs.hpp"
#include "host_test_support.hpp"

#include <doctest/doctest.h>

using namespace encgraph::host;
namespace fs = std::filesystem;

namespace {

bool holds(const std::vector<NamedFile>& files, const std::string& what, const fs::path& path) {
  for (const auto& f : files)
    if (f.what == what && f.path == path) return true;
  return false;
}

}  // namespace

TEST_CASE("the inputs: config, weights, plugin settings naming files, trace, images, frames") {
  host_test::TempDir dir;
  HostConfig c;
  c.source = dir.write("c.toml", "").string();
  c.runtime.weights = dir.write("w.safetensors", "").string();
  c.runtime.plugin_config = {{"config_json", dir.write("config.json", "{}").string()},
                             {"hidden", "8"},
                             {"tokenizer", (dir / "missing.json").string()}};
  c.workload.kind = "trace";
  c.workload.trace = (dir / "t.jsonl").string();
  WorkItem image, video;
  image.file = "a.png";
  video.id = "clip";
  video.frame_files = {"f1.png", "f2.png"};
  const auto inputs = command_inputs(c, {image, video});
  CHECK(holds(inputs, "config", c.source));
  CHECK(holds(inputs, "weights (plugin.weights)", c.runtime.weights));
  CHECK(holds(inputs, "file named by plugin.config.config_json", dir / "config.json"));
  CHECK(holds(inputs, "trace", c.workload.trace));
  CHECK(holds(inputs, "image", "a.png"));
  CHECK(holds(inputs, "frame of video 'clip'", "f2.png"));
  CHECK(holds(inputs, "encgraph program", fs::read_symlink("/proc/self/exe")));
  CHECK(inputs.size() == 8);  // "8" and the missing file are no files; no plugin is named

  c.runtime.weights = "random";
  c.workload.kind = "synthetic";
  CHECK(command_inputs(c, {}).size() == 3);  // the program, the config and config_json
}

TEST_CASE("the plugin's library is an input: an output over it is refused before any work") {
  host_test::TempDir dir;
  HostConfig c;
  c.runtime.plugin = "toy";
  c.runtime.plugin_dirs = {host_test::plugin_dir()};
  const fs::path library = fs::path(host_test::plugin_dir()) / "libencgraph_toy.so";
  CHECK(holds(command_inputs(c, {}), "plugin library (plugin.name = \"toy\")", library));
  c.output.embeddings = library.string();
  std::string message;
  try {
    check_outputs_against_inputs(c, {});
  } catch (const encgraph::Error& e) {
    message = e.what();
  }
  CHECK(message.find("is the plugin library (plugin.name = \"toy\")") != std::string::npos);
  // An invalid plugin name is left to the loader, which names it.
  c.runtime.plugin = "../evil";
  CHECK_NOTHROW(command_inputs(c, {}));
}

TEST_CASE("outputs are checked against each other and against every input") {
  host_test::TempDir dir;
  HostConfig c;
  c.source = dir.write("c.toml", "").string();
  const fs::path config_json = dir.write("config.json", "{}");
  c.runtime.plugin_config = {{"config_json", config_json.string()}};
  CHECK(command_outputs(c).empty());
  c.output.embeddings = config_json.string();
  CHECK_THROWS_WITH_AS(check_outputs_against_inputs(c, {}),
                       doctest::Contains("is the file named by plugin.config.config_json"),
                       encgraph::Error);
  CHECK(command_outputs(c).size() == 1);
  c.output.embeddings = (dir / "e.safetensors").string();
  c.output.report = (dir / "e.safetensors").string();
  CHECK_THROWS_WITH_AS(check_outputs_against_inputs(c, {}), doctest::Contains("are the same file"),
                       encgraph::Error);
  c.output.report = (dir / "r.json").string();
  CHECK_NOTHROW(check_outputs_against_inputs(c, {}));
  fs::create_directories(dir / "r.json");
  CHECK_THROWS_WITH_AS(check_output_targets(c), doctest::Contains("report '"), encgraph::Error);
}
