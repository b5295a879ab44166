// The config loader: defaults, every key's type, every error path (each message
// must name the key and where it was written), --set overrides, the flattened
// [plugin.config], the digest, and docs/config.md covering every key.
#include "config.hpp"
#include "config_schema.hpp"
#include "host_test_support.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

using namespace encgraph::host;
using host_test::config_error;

namespace {

const std::string kMinimal = "[plugin]\nname = \"toy\"\n";

HostConfig load(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return load_config_text(text, "t.toml", overrides);
}

std::string plugin_value(const HostConfig& c, const std::string& key) {
  for (const auto& [k, v] : c.runtime.plugin_config)
    if (k == key) return v;
  return "<missing>";
}

}  // namespace

TEST_CASE("a minimal config resolves to the documented defaults") {
  const HostConfig c = load(kMinimal);
  CHECK(c.runtime.plugin == "toy");
  CHECK(c.runtime.device == "auto");
  CHECK(c.log_level == "info");
  CHECK(c.runtime.plugin_dirs.empty());
  CHECK(c.runtime.use_graphs);
  CHECK_FALSE(c.runtime.drop_budget_on_oom);
  CHECK(c.runtime.prefer_faster_path);
  CHECK_FALSE(c.runtime.poison_memory);
  CHECK(c.runtime.stats_log_interval == 100);
  CHECK(c.runtime.weights.empty());
  CHECK(c.runtime.plugin_config.empty());
  CHECK(c.runtime.budgets.token_budgets.empty());
  CHECK(c.runtime.budgets.max_items_per_batch == 0);
  CHECK_FALSE(c.runtime.budgets.max_frames_per_batch.has_value());
  CHECK(c.runtime.budgets.video_enabled);
  CHECK(c.workload.kind == "synthetic");
  CHECK(c.workload.count == 64);
  CHECK(c.workload.seed == 0);
  CHECK(c.workload.min_side == 224);
  CHECK(c.workload.max_side == 448);
  CHECK(c.workload.side_multiple == 28);
  CHECK(c.workload.video_fraction == 0.0);
  CHECK(c.workload.frames == 4);
  CHECK(c.workload.request_size == 16);
  CHECK(c.workload.warmup_requests == 1);
  CHECK(c.output.embeddings.empty());
  CHECK(c.output.report.empty());
  CHECK(c.digest.size() == 16);
}

TEST_CASE("every key is read with its type") {
  const HostConfig c = load(R"(
[runtime]
device = "cuda:1"
log_level = "debug"
plugin_dirs = ["a", "b"]
use_graphs = false
drop_budget_on_oom = true
prefer_faster_path = false
poison_memory = true
stats_log_interval = 0
[plugin]
name = "qwen2_5_vl"
weights = "random"
[budgets]
token_budgets = [512, 256]
max_items_per_batch = 8
max_frames_per_batch = 0
video = true
[workload]
kind = "synthetic"
count = 3
seed = 9
sizes = [[224, 448], [28, 56]]
min_side = 28
max_side = 56
side_multiple = 14
video_fraction = 1
frames = 2
trace = "t.jsonl"
files = ["x.png"]
request_size = 5
warmup_requests = 0
[output]
embeddings = "e.safetensors"
report = "r.json"
)");
  CHECK(c.runtime.device == "cuda:1");
  CHECK(c.log_level == "debug");
  REQUIRE(c.runtime.plugin_dirs.size() == 2);
  CHECK(c.runtime.plugin_dirs[1] == "b");
  CHECK_FALSE(c.runtime.use_graphs);
  CHECK(c.runtime.drop_budget_on_oom);
  CHECK_FALSE(c.runtime.prefer_faster_path);
  CHECK(c.runtime.poison_memory);
  CHECK(c.runtime.stats_log_interval == 0);
  CHECK(c.runtime.plugin == "qwen2_5_vl");
  CHECK(c.runtime.weights == "random");
  CHECK(c.runtime.budgets.token_budgets == std::vector<int64_t>{512, 256});
  CHECK(c.runtime.budgets.max_items_per_batch == 8);
  CHECK(c.runtime.budgets.max_frames_per_batch == 0);
  CHECK(c.workload.count == 3);
  CHECK(c.workload.seed == 9);
  REQUIRE(c.workload.sizes.size() == 2);
  CHECK(c.workload.sizes[1] == std::array<int64_t, 2>{28, 56});
  CHECK(c.workload.side_multiple == 14);
  CHECK(c.workload.video_fraction == 1.0);  // an integer is a number
  CHECK(c.workload.frames == 2);
  CHECK(c.workload.trace == "t.jsonl");
  CHECK(c.workload.files == std::vector<std::string>{"x.png"});
  CHECK(c.workload.request_size == 5);
  CHECK(c.workload.warmup_requests == 0);
  CHECK(c.output.embeddings == "e.safetensors");
  CHECK(c.output.report == "r.json");
}

TEST_CASE("[plugin.config] is flattened: nested keys joined by '.', arrays as [a, b]") {
  const HostConfig c = load(kMinimal + R"(
[plugin.config]
depth = 32
scale = 0.5
whole = 2.0
flag = false
name = "bf16"
fullatt_block_indexes = [7, 15, 23, 31]
names = ["a", "b"]
nested = [[1, 2], [3]]
[plugin.config.vision]
hidden_size = 1280
)");
  CHECK(plugin_value(c, "depth") == "32");
  CHECK(plugin_value(c, "scale") == "0.5");
  CHECK(plugin_value(c, "whole") == "2.0");
  CHECK(plugin_value(c, "flag") == "false");
  CHECK(plugin_value(c, "name") == "bf16");
  CHECK(plugin_value(c, "fullatt_block_indexes") == "[7, 15, 23, 31]");
  CHECK(plugin_value(c, "names") == "[a, b]");
  CHECK(plugin_value(c, "nested") == "[[1, 2], [3]]");
  CHECK(plugin_value(c, "vision.hidden_size") == "1280");
  CHECK(c.runtime.plugin_config.size() == 9);
}

TEST_CASE("a TOML syntax error names the file, line and column") {
  const std::string e = config_error("[runtime]\ndevice = \"cpu\"\nuse_graphs = \n");
  CHECK(e.find("t.toml:3:") == 0);
  CHECK(e.find("TOML syntax error") != std::string::npos);
}

TEST_CASE("a missing config file is a config error naming it") {
  try {
    load_config("/nonexistent/encgraph.toml", {});
    FAIL("no error");
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Config);
    CHECK(std::string(e.what()).find("/nonexistent/encgraph.toml") != std::string::npos);
  }
}

TEST_CASE("unknown keys name the key, the file and the line, and suggest the near miss") {
  const std::string e = config_error(kMinimal + "[runtime]\ndevise = \"cpu\"\n");
  CHECK(e.find("t.toml:4:") == 0);
  CHECK(e.find("unknown key 'runtime.devise'") != std::string::npos);
  CHECK(e.find("did you mean 'device'?") != std::string::npos);

  const std::string table = config_error(kMinimal + "\n[runtim]\ndevice = \"cpu\"\n");
  CHECK(table.find("t.toml:") == 0);
  CHECK(table.find("unknown key 'runtim'") != std::string::npos);
  CHECK(table.find("did you mean 'runtime'?") != std::string::npos);

  const std::string far = config_error(kMinimal + "[workload]\nzzz = 1\n");
  CHECK(far.find("t.toml:4:") == 0);
  CHECK(far.find("unknown key 'workload.zzz'") != std::string::npos);
  CHECK(far.find("did you mean") == std::string::npos);

  const std::string section = config_error("runtime = 3\n" + kMinimal);
  CHECK(section.find("t.toml:1:") == 0);
  CHECK(section.find("'runtime' must be a table") != std::string::npos);
}

TEST_CASE("type mismatches name the key, the expected and the given type, and the line") {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[runtime]\nuse_graphs = \"yes\"\n",
       "t.toml:4:14: runtime.use_graphs: expected a boolean, got a string"},
      {"[runtime]\ndevice = 3\n", "t.toml:4:10: runtime.device: expected a string, got an integer"},
      {"[budgets]\nmax_items_per_batch = 1.5\n",
       "t.toml:4:23: budgets.max_items_per_batch: expected an integer, got a floating-point "
       "number"},
      {"[budgets]\ntoken_budgets = 64\n",
       "budgets.token_budgets: expected an array of integers, got an integer"},
      {"[budgets]\ntoken_budgets = [64, \"x\"]\n",
       "t.toml:4:22: budgets.token_budgets[1]: expected an integer, got a string"},
      {"[runtime]\nplugin_dirs = [1]\n",
       "runtime.plugin_dirs[0]: expected a string, got an integer"},
      {"[workload]\nsizes = [[224]]\n",
       "workload.sizes[0]: expected a [height, width] pair, got an array of 1"},
      {"[workload]\nsizes = [224]\n",
       "workload.sizes[0]: expected a [height, width] pair, got an integer"},
      {"[workload]\nvideo_fraction = \"half\"\n",
       "workload.video_fraction: expected a number, got a string"},
      {"[plugin.config]\n", ""},  // a table is fine
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string e = config_error(kMinimal + c.text);
    if (c.expect.empty())
      CHECK(e.empty());
    else
      CHECK(e.find(c.expect) != std::string::npos);
  }
  const std::string not_table = config_error("[plugin]\nname = \"toy\"\nconfig = 3\n");
  CHECK(not_table.find("t.toml:3:10: plugin.config: expected a table, got an integer") == 0);
}

TEST_CASE("bad values name the key and explain the fix") {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[runtime]\ndevice = \"gpu\"\n",
       "t.toml:4:10: runtime.device: \"gpu\" is not a device; use \"auto\", \"cpu\", \"cuda\" or "
       "\"cuda:N\""},
      {"[runtime]\ndevice = \"cuda:x\"\n", "\"cuda:x\" is not a device"},
      {"[runtime]\ndevice = \"cuda:\"\n", "\"cuda:\" is not a device"},
      {"[runtime]\nlog_level = \"loud\"\n",
       "t.toml:4:13: runtime.log_level: \"loud\" is not a log level"},
      {"[runtime]\nstats_log_interval = -1\n", "runtime.stats_log_interval: must be >= 0, got -1"},
      {"[budgets]\ntoken_budgets = [0, 64]\n",
       "t.toml:4:17: budgets.token_budgets: budgets must be positive, got 0"},
      {"[budgets]\nmax_items_per_batch = -2\n",
       "budgets.max_items_per_batch: must be >= 0, got -2"},
      {"[budgets]\nmax_frames_per_batch = -1\n",
       "budgets.max_frames_per_batch: must be >= 0, got -1"},
      {"[workload]\nkind = \"random\"\n",
       "t.toml:4:8: workload.kind: \"random\" is not a workload kind"},
      {"[workload]\nkind = \"trace\"\n",
       "workload.trace: is required when workload.kind = \"trace\""},
      {"[workload]\nkind = \"files\"\n",
       "workload.files: is required when workload.kind = \"files\""},
      {"[workload]\ncount = -1\n", "workload.count: must be >= 0, got -1"},
      {"[workload]\nseed = -1\n", "workload.seed: must be >= 0, got -1"},
      {"[workload]\nsizes = [[0, 5]]\n", "workload.sizes: sizes must be positive, got [0, 5]"},
      {"[workload]\nmin_side = 500\nmax_side = 400\n",
       "t.toml:5:12: workload.max_side: must be >= workload.min_side (500), got 400"},
      {"[workload]\nmin_side = 0\n", "workload.min_side: must be >= 1, got 0"},
      {"[workload]\nside_multiple = 0\n", "workload.side_multiple: must be >= 1, got 0"},
      {"[workload]\nmin_side = 230\nmax_side = 250\nside_multiple = 28\n",
       "workload.side_multiple: no multiple of 28 lies between min_side 230 and max_side 250"},
      {"[workload]\nvideo_fraction = 1.5\n", "workload.video_fraction: must lie in [0, 1]"},
      {"[workload]\nvideo_fraction = 0.5\n[budgets]\nvideo = false\n",
       "workload.video_fraction: asks for videos but budgets.video = false"},
      {"[workload]\nframes = 0\n", "workload.frames: must be >= 1, got 0"},
      {"[workload]\nrequest_size = 0\n", "workload.request_size: must be >= 1, got 0"},
      {"[workload]\nwarmup_requests = -1\n", "workload.warmup_requests: must be >= 0, got -1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string e = config_error(kMinimal + c.text);
    CHECK(e.find(c.expect) != std::string::npos);
  }
}

TEST_CASE("plugin.name is required and may not hold path characters") {
  const std::string missing = config_error("[runtime]\ndevice = \"cpu\"\n");
  CHECK(missing.find("t.toml (default of plugin.name): plugin.name: is required") == 0);
  const std::string path = config_error("[plugin]\nname = \"../evil\"\n");
  CHECK(path.find("t.toml:2:8: plugin.name: \"../evil\" may only hold") == 0);
}

TEST_CASE("invalid explicit budgets fail at load time with the planner's explanation") {
  const std::string e =
      config_error(kMinimal + "[budgets]\ntoken_budgets = [128, 64]\nmax_items_per_batch = 100\n");
  CHECK(e.find("t.toml:5:23: budgets.max_items_per_batch (100) must be <= the smallest token "
               "budget (64)") == 0);
  CHECK(e.find("Raise the smallest budget or lower max_items_per_batch") != std::string::npos);
  // The same numbers within the invariant load.
  CHECK(config_error(kMinimal + "[budgets]\ntoken_budgets = [128, 64]\nmax_items_per_batch = 64\n")
            .empty());
}

TEST_CASE("budgets.token_step is read, checked, and excludes an explicit list") {
  CHECK(load(kMinimal).runtime.budgets.token_step == 0);
  CHECK(load(kMinimal + "[budgets]\ntoken_step = 512\n").runtime.budgets.token_step == 512);
  CHECK(load(kMinimal, {"budgets.token_step=1024"}).runtime.budgets.token_step == 1024);
  const std::string negative = config_error(kMinimal + "[budgets]\ntoken_step = -4\n");
  CHECK(negative.find("budgets.token_step") != std::string::npos);
  CHECK(negative.find("must be >= 0") != std::string::npos);
  const std::string both =
      config_error(kMinimal + "[budgets]\ntoken_budgets = [64, 128]\ntoken_step = 64\n");
  CHECK(both.find("t.toml:5:14: budgets.token_step") == 0);
  CHECK(both.find("remove one of the two") != std::string::npos);
  // Unset, the digest is what it was before the key existed.
  CHECK(load(kMinimal).digest == load(kMinimal + "[budgets]\ntoken_step = 0\n").digest);
  CHECK(load(kMinimal).digest != load(kMinimal + "[budgets]\ntoken_step = 256\n").digest);
}

TEST_CASE("--set overrides any key, parsing the value as TOML, else as a string") {
  const HostConfig c = load(
      kMinimal + "[runtime]\ndevice = \"cpu\"\n[plugin.config]\nhidden = 8\n",
      {"runtime.device=cuda:1", "budgets.token_budgets=[128, 256]", "workload.video_fraction=0.5",
       "plugin.config.hidden=16", "plugin.config.vision.depth=4",
       "plugin.weights=/tmp/w.safetensors", "plugin.config.dtype=\"bf16\"", "output.report=r.json",
       "runtime.use_graphs=false", "workload.count=5", "workload.count=6"});
  CHECK(c.runtime.device == "cuda:1");
  CHECK(c.runtime.budgets.token_budgets == std::vector<int64_t>{128, 256});
  CHECK(c.workload.video_fraction == 0.5);
  CHECK(plugin_value(c, "hidden") == "16");
  CHECK(plugin_value(c, "vision.depth") == "4");
  CHECK(plugin_value(c, "dtype") == "bf16");
  CHECK(c.runtime.weights == "/tmp/w.safetensors");
  CHECK(c.output.report == "r.json");  // a table the file lacks is created
  CHECK_FALSE(c.runtime.use_graphs);
  CHECK(c.workload.count == 6);  // the last one wins
}

TEST_CASE("errors about overridden keys name the --set argument") {
  CHECK(
      config_error(kMinimal, {"runtime.devise=gpu"}) ==
      "--set runtime.devise=gpu: unknown key 'runtime.devise' (known keys in [runtime]: device, "
      "data_parallel, log_level, plugin_dirs, use_graphs, drop_budget_on_oom, prefer_faster_path, "
      "poison_memory, stats_log_interval); did you "
      "mean 'device'?");
  CHECK(config_error(kMinimal, {"runtime.use_graphs=yes"}) ==
        "--set runtime.use_graphs=yes: runtime.use_graphs: expected a boolean, got a string");
  CHECK(config_error(kMinimal, {"runtime.device=gpu"})
            .find("--set runtime.device=gpu: runtime.device: \"gpu\" is not a device") == 0);
  CHECK(config_error(kMinimal, {"workload"}) == "--set workload: expected key.path=value");
  CHECK(config_error(kMinimal, {"=3"}) == "--set =3: expected key.path=value");
  CHECK(config_error(kMinimal, {"bad key=1"})
            .find("--set bad key=1: 'bad key' is not a valid key path") == 0);
  CHECK(config_error(kMinimal + "[runtime]\ndevice = \"cpu\"\n", {"runtime.device.x=1"}) ==
        "--set runtime.device.x=1: 'runtime.device' is a string in the config, not a table");
}

TEST_CASE("the digest follows the resolved settings, not the spelling or the outputs") {
  const std::string a = load(kMinimal + "[workload]\ncount = 8\nseed = 1\n").digest;
  const std::string b = load("[workload]\nseed = 1\ncount = 8 # same\n" + kMinimal).digest;
  const std::string c = load(kMinimal + "[workload]\ncount = 9\nseed = 1\n").digest;
  const std::string d =
      load(kMinimal + "[workload]\ncount = 8\nseed = 1\n[output]\nreport = \"x.json\"\n").digest;
  const std::string e =
      load(kMinimal + "[workload]\ncount = 8\nseed = 1\n", {"plugin.config.hidden=4"}).digest;
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a == d);
  CHECK(a != e);
  CHECK(canonical_config(load(kMinimal)).find("workload.count = 64\n") != std::string::npos);
}

TEST_CASE("docs/config.md documents every key with its default") {
  std::ifstream in(std::string(EG_HOST_SOURCE_DIR) + "/docs/config.md");
  REQUIRE(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (const auto& key : config_schema()) {
    CAPTURE(key.path);
    const std::string quoted = std::string("`").append(key.path).append("`");
    bool documented = false;
    for (const auto& line : lines)
      if (line.find(quoted) != std::string::npos &&
          line.find(std::string(key.default_value)) != std::string::npos)
        documented = true;
    CHECK(documented);
  }
}
