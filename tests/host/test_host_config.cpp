// The config loader: defaults, every key's type, every error path (each message
// must name the key and where it was written), --set overrides, the flattened
// [plugin.config], the digest, docs/config.md covering every key, and the
// per-path [budgets.paths.<name>] tables up to the plan the two-path toy makes.
#include "config.hpp"
#include "config_schema.hpp"
#include "host_test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

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
  CHECK(c.runtime.item_threads == 0);
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
item_threads = 3
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
  CHECK(c.runtime.item_threads == 3);
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

TEST_CASE("a missing config file is an input error naming it") {
  try {
    load_config("/nonexistent/encgraph.toml", {});
    FAIL("no error");
  } catch (const encgraph::Error& e) {
    CHECK(e.kind() == encgraph::ErrorKind::Input);
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
       "t.toml:4:10: runtime.device: \"gpu\" is not a device; use \"auto\", \"cpu\", \"cuda\", "
       "\"cuda:N\" or \"cuda:{local_rank}\""},
      {"[runtime]\ndevice = \"cuda:x\"\n", "\"cuda:x\" is not a device"},
      {"[runtime]\ndevice = \"cuda:\"\n", "\"cuda:\" is not a device"},
      {"[runtime]\nlog_level = \"loud\"\n",
       "t.toml:4:13: runtime.log_level: \"loud\" is not a log level"},
      {"[runtime]\nstats_log_interval = -1\n", "runtime.stats_log_interval: must be >= 0, got -1"},
      {"[runtime]\nitem_threads = 65\n", "runtime.item_threads: must lie in [0, 64]"},
      {"[runtime]\nitem_threads = -1\n", "runtime.item_threads: must lie in [0, 64]"},
      {"[budgets]\ntoken_budgets = [0, 64]\n",
       "t.toml:4:18: budgets.token_budgets: budgets must be positive, got 0"},
      {"[budgets]\nmax_items_per_batch = -2\n",
       "t.toml:4:23: budgets.max_items_per_batch: must be >= 0 (0 infers it), got -2"},
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
  CHECK(e.find("t.toml:5:23: budgets.max_items_per_batch: 100 must be <= the smallest token "
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
      "pipeline_first_batch, overlap_uploads, item_threads, poison_memory, stats_log_interval); "
      "did you "
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

TEST_CASE("[limits] is read, each limit positive and bounded, and sets the plan's graph bound") {
  const HostConfig d = load(kMinimal);
  CHECK(d.limits.max_graphs == 256);
  CHECK(d.limits.max_items == 1000000);
  CHECK(d.limits.max_request_size == 4096);
  CHECK(d.limits.max_frames_per_video == 4096);
  CHECK(d.limits.max_image_pixels == 178956970);
  CHECK(d.limits.max_text_bytes == 64ll << 20);
  CHECK(d.runtime.budgets.max_graphs == 256);
  const HostConfig c = load(kMinimal +
                            "[limits]\nmax_graphs = 12\nmax_items = 5\nmax_request_size = 3\n"
                            "max_frames_per_video = 7\nmax_image_pixels = 1000000\n"
                            "max_text_bytes = 4096\n[workload]\ncount = 5\nrequest_size = 3\n"
                            "min_side = 28\nmax_side = 56\n");
  CHECK(c.limits.max_graphs == 12);
  CHECK(c.runtime.budgets.max_graphs == 12);
  CHECK(c.limits.max_items == 5);
  CHECK(c.limits.max_request_size == 3);
  CHECK(c.limits.max_frames_per_video == 7);
  CHECK(c.limits.max_image_pixels == 1000000);
  CHECK(c.limits.max_text_bytes == 4096);
  for (const char* key : {"max_graphs", "max_items", "max_request_size", "max_frames_per_video",
                          "max_image_pixels", "max_text_bytes"}) {
    CAPTURE(key);
    const std::string zero = config_error(kMinimal + "[limits]\n" + key + " = 0\n");
    CHECK(zero.find("t.toml:4:") == 0);
    CHECK(zero.find(std::string("limits.") + key + ": must lie in [1, ") != std::string::npos);
    CHECK(config_error(kMinimal + "[limits]\n" + key + " = -3\n").find("got -3") !=
          std::string::npos);
    CHECK(config_error(kMinimal, {std::string("limits.") + key + "=4611686018427387904"})
              .find(std::string("--set limits.") + key) == 0);
  }
  CHECK(config_error(kMinimal + "[limits]\nmax_grafs = 3\n").find("did you mean 'max_graphs'?") !=
        std::string::npos);
}

TEST_CASE("workload sizes and counts are held to [limits], naming the key and the limit") {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[workload]\ncount = 1000001\n",
       "t.toml:4:9: workload.count: 1000001 exceeds limits.max_items (1000000); lower "
       "workload.count or raise limits.max_items in [limits]"},
      {"[workload]\ncount = 9223372036854775807\n", "workload.count: 9223372036854775807 exceeds"},
      {"[workload]\nrequest_size = 5000\n",
       "workload.request_size: 5000 exceeds limits.max_request_size (4096)"},
      {"[workload]\nframes = 5000\n",
       "workload.frames: 5000 exceeds limits.max_frames_per_video (4096)"},
      {"[workload]\nframes = -4\n", "workload.frames: must be >= 1, got -4"},
      {"[workload]\nsizes = [[100000, 100000]]\n",
       "workload.sizes: [100000, 100000] has more pixels than limits.max_image_pixels"},
      {"[workload]\nsizes = [[9223372036854775807, 9223372036854775807]]\n",
       "has more pixels than limits.max_image_pixels"},
      {"[workload]\nmax_side = 20000\n",
       "workload.max_side: 20000 x 20000 pixels exceed limits.max_image_pixels"},
      {"[workload]\nmin_side = -5\n", "workload.min_side: must be >= 1, got -5"},
      {"[workload]\nside_multiple = -28\n", "workload.side_multiple: must be >= 1, got -28"},
      {"[limits]\nmax_items = 10\n[workload]\ncount = 11\n",
       "workload.count: 11 exceeds limits.max_items (10)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    CHECK(config_error(kMinimal + c.text).find(c.expect) != std::string::npos);
  }
  // Raising the limit admits the value.
  CHECK(load(kMinimal + "[limits]\nmax_items = 2000000\n[workload]\ncount = 1500000\n")
            .workload.count == 1500000);
  CHECK(config_error(kMinimal, {"workload.count=2000000"}).find("--set workload.count=2000000: ") ==
        0);
}

TEST_CASE("budgets: absurd values and too many graphs are config errors naming the key") {
  CHECK(config_error(kMinimal + "[budgets]\ntoken_step = 4611686018427387904\n")
            .find("t.toml:4:14: budgets.token_step: must be <= 1073741824") == 0);
  CHECK(config_error(kMinimal + "[budgets]\ntoken_budgets = [64, 4611686018427387904]\n")
            .find("t.toml:4:22: budgets.token_budgets: must be <= 1073741824") == 0);
  CHECK(config_error(kMinimal + "[budgets]\nmax_items_per_batch = 4611686018427387904\n")
            .find("budgets.max_items_per_batch: must be <= 1073741824") != std::string::npos);
  CHECK(config_error(kMinimal + "[budgets]\nmax_frames_per_batch = 4611686018427387904\n")
            .find("budgets.max_frames_per_batch: must be <= 1073741824") != std::string::npos);
  // An explicit list longer than limits.max_graphs: the planner's message at the list.
  std::string list = "[";
  for (int i = 1; i <= 300; ++i) list += std::to_string(i * 64) + (i < 300 ? ", " : "]");
  const std::string many = config_error(kMinimal + "[budgets]\ntoken_budgets = " + list + "\n");
  CHECK(many.find("t.toml:4:17: budgets.token_budgets: the plan would capture 300 graphs, more "
                  "than limits.max_graphs (256)") == 0);
  CHECK(many.find("capture-axis") == std::string::npos);
  CHECK(load(kMinimal + "[limits]\nmax_graphs = 300\n[budgets]\ntoken_budgets = " + list + "\n")
            .runtime.budgets.token_budgets.size() == 300);
}

TEST_CASE("non-finite floats and NUL characters are refused where they are written") {
  for (const char* v : {"nan", "inf", "-inf", "+nan"}) {
    CAPTURE(v);
    const std::string e = config_error(kMinimal + "[workload]\nvideo_fraction = " + v + "\n");
    CHECK(e.find("t.toml:4:18: workload.video_fraction: must be a finite number") == 0);
    const std::string p = config_error(kMinimal + "[plugin.config]\nscale = " + v + "\n");
    CHECK(p.find("t.toml:4:9: plugin.config.scale: must be a finite number") == 0);
  }
  CHECK(config_error(kMinimal, {"workload.video_fraction=nan"})
            .find("--set workload.video_fraction=nan: workload.video_fraction: must be a finite") ==
        0);
  CHECK(config_error(kMinimal + "[output]\nreport = \"r\\u0000.json\"\n")
            .find("t.toml:4:10: output.report: the string holds a NUL character") == 0);
  CHECK(config_error(kMinimal + "[workload]\nkind = \"files\"\nfiles = [\"a.png\", \"b\\u0000\"]\n")
            .find("workload.files[1]: the string holds a NUL character") != std::string::npos);
  CHECK(config_error(kMinimal + "[plugin.config]\ns = \"a\\u0000b\"\n")
            .find("plugin.config.s: the string holds a NUL character") != std::string::npos);
}

TEST_CASE("integers outside 64 bits name the line in a file and the key in a --set") {
  const std::string file = config_error(kMinimal + "[workload]\nseed = 99999999999999999999\n");
  CHECK(file.find("t.toml:4:") == 0);
  CHECK(file.find("TOML syntax error") != std::string::npos);
  CHECK(file.find("(in: `seed = 99999999999999999999`)") != std::string::npos);
  const std::string set = config_error(kMinimal, {"workload.seed=99999999999999999999"});
  CHECK(set.find("--set workload.seed=99999999999999999999: workload.seed: expected an integer, "
                 "got a string (a number outside the 64-bit integer range") == 0);
}

TEST_CASE("--set changes exactly the key it names: injection attempts are refused") {
  struct Case {
    std::string set, expect;
  };
  const std::vector<Case> cases = {
      // A newline and a table header, in the value and in the key.
      {"plugin.name=\"toy\"\n[output]\nreport=\"r.json\"",
       "--set plugin.name=\"toy\"\\n[output]\\nreport=\"r.json\": the value holds a raw control "
       "character"},
      {"plugin.name=toy\r\n[output]", "the value holds a raw control character"},
      {"output.report\n[x]=r.json", "the key 'output.report\\n[x]' holds a control character"},
      {"plugin.weights=a\x01"
       "b",
       "--set plugin.weights=a\\x01b: the value holds a raw control"},
      {"plugin.weights=a\x7f", "the value holds a raw control character"},
      // Tables, inline or inside an array.
      {"output={report=\"r.json\"}", "the value is a table; a --set changes one key"},
      {"plugin.config={hidden=3}", "the value is a table"},
      {"workload.sizes=[{h=1}]", "the value is a table"},
      // Not UTF-8.
      {"plugin.weights=\xff\xfe", "--set plugin.weights=\\xFF\\xFE: is not valid UTF-8"},
      // Not a key path.
      {"[output]=1", "'[output]' is not a valid key path"},
      {"a b.c=1", "'a b.c' is not a valid key path"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.set);
    const std::string e = config_error(kMinimal, {c.set});
    CHECK(e.find(c.expect) != std::string::npos);
  }
  // The quoting hint comes with value errors.
  CHECK(config_error(kMinimal, {"plugin.name=\"toy\"\n[output]"})
            .find("--set 'plugin.config.prompt=\"two\\nlines\"'") != std::string::npos);
  // A trailing key on the same line is no TOML value: the whole text is one
  // string, which plugin.name refuses; nothing else is set.
  CHECK(config_error(kMinimal, {"plugin.name=\"toy\" report=\"r.json\""})
            .find("may only hold letters") != std::string::npos);
  const HostConfig t = load(kMinimal, {"output.embeddings=\"e\" output.report=\"r\""});
  CHECK(t.output.embeddings == "\"e\" output.report=\"r\"");
  CHECK(t.output.report.empty());
  // TOML escapes inside a quoted string stay inside that string.
  const HostConfig u = load(kMinimal, {"plugin.name=\"\\u0074oy\"",
                                       "plugin.config.prompt=\"a\\n[output]\\nreport = 1\""});
  CHECK(u.runtime.plugin == "toy");
  CHECK(plugin_value(u, "prompt") == "a\n[output]\nreport = 1");
  CHECK(u.output.report.empty());
  // A comment after the value and a tab are fine.
  CHECK(load(kMinimal, {"workload.count=5 # five"}).workload.count == 5);
  CHECK(load(kMinimal, {"workload.count=\t7"}).workload.count == 7);
}

TEST_CASE("the config file: regular files only, capped, each error naming the file") {
  host_test::TempDir dir;
  auto error_of = [](const std::filesystem::path& file) {
    try {
      load_config(file, {});
    } catch (const encgraph::Error& e) {
      CHECK(e.kind() == encgraph::ErrorKind::Input);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(dir / "missing.toml")
            .find("config '" + (dir / "missing.toml").string() + "' does not exist") == 0);
  CHECK(error_of(dir.path()).find("is a directory") != std::string::npos);
  CHECK(error_of("/dev/zero").find("config '/dev/zero' is a character device") == 0);
  const auto fifo = dir / "fifo.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of(fifo).find("is a FIFO") != std::string::npos);  // and returns at once
  const auto huge = dir.write("huge.toml", kMinimal + std::string(kMaxConfigBytes, '#'));
  const std::string e = error_of(huge);
  CHECK(e.find("huge.toml' is " + std::to_string(kMinimal.size() + kMaxConfigBytes) +
               " bytes, over the limit of 4194304 bytes") != std::string::npos);
  // A file just under the cap loads.
  const auto big = dir.write("big.toml", kMinimal + "#" + std::string(kMaxConfigBytes - 40, 'x'));
  CHECK(load_config(big, {}).runtime.plugin == "toy");
}

TEST_CASE("limits join the digest only when changed") {
  CHECK(load(kMinimal).digest == load(kMinimal + "[limits]\nmax_graphs = 256\n").digest);
  CHECK(load(kMinimal).digest != load(kMinimal + "[limits]\nmax_graphs = 512\n").digest);
  CHECK(canonical_config(load(kMinimal, {"limits.max_items=7", "workload.count=7"}))
            .find("limits.max_items = 7\n") != std::string::npos);
  CHECK(canonical_config(load(kMinimal)).find("limits.") == std::string::npos);
}

TEST_CASE("keys nested past kMaxKeyDepth are refused before parsing; dots elsewhere are fine") {
  auto dotted = [](int parts) {
    std::string key = "a";
    for (int i = 1; i < parts; ++i) key += ".a";
    return key;
  };
  // Tens of thousands of parts overflowed the parser's stack.
  CHECK(config_error(kMinimal + "[plugin.config]\n" + dotted(50000) + " = 1\n")
            .find("t.toml:4:1: a dotted key or table header nests more than 64 levels") == 0);
  CHECK(config_error(kMinimal + "[" + dotted(50000) + "]\n")
            .find("t.toml:3:2: a dotted key or table header nests more than 64") == 0);
  CHECK(config_error(kMinimal, {dotted(50000) + "=1"}).find("--set a.a.a") == 0);
  // Within the bound, and dots inside strings, comments and float arrays.
  CHECK(plugin_value(load(kMinimal + "[plugin.config]\n" + dotted(60) + " = 1\n"), dotted(60)) ==
        "1");
  std::string floats = "[", dots(500, '.');
  for (int i = 0; i < 200; ++i) floats += (i ? ", " : "") + std::to_string(i) + ".5";
  const HostConfig c =
      load(kMinimal + "# " + dots + "\n[plugin.config]\nf = " + floats + "]\ns = \"" + dots +
           "\"\nl = '" + dots + "'\nm = \"\"\"\n" + dots + "\n\"\"\"\n\"q." + dots + "\" = 2\n");
  CHECK(plugin_value(c, "s") == dots);
  CHECK(plugin_value(c, "q." + dots) == "2");
}

TEST_CASE("[budgets.paths.<name>] is read per path, by --set too, and joins the digest if set") {
  const HostConfig c = load(kMinimal +
                            "[budgets]\ntoken_budgets = [256, 512]\n"
                            "[budgets.paths.local]\ntoken_budgets = [576, 144]\n"
                            "[budgets.paths.global]\ntoken_step = 256\n");
  const auto& paths = c.runtime.budgets.paths;
  REQUIRE(paths.size() == 2);
  CHECK(paths.at("local").token_budgets == std::vector<int64_t>{576, 144});
  CHECK(paths.at("local").token_step == 0);
  CHECK(paths.at("global").token_budgets.empty());
  CHECK(paths.at("global").token_step == 256);
  CHECK(c.runtime.budgets.token_budgets == std::vector<int64_t>{256, 512});
  const HostConfig set = load(kMinimal, {"budgets.paths.local.token_budgets=[144, 288]"});
  CHECK(set.runtime.budgets.paths.at("local").token_budgets == std::vector<int64_t>{144, 288});
  CHECK(load(kMinimal).runtime.budgets.paths.empty());
  // Unset, the digest is what it was before the table existed; set, it differs per list.
  CHECK(canonical_config(load(kMinimal)).find("budgets.paths") == std::string::npos);
  CHECK(load(kMinimal).digest != set.digest);
  CHECK(set.digest != load(kMinimal, {"budgets.paths.local.token_budgets=[144]"}).digest);
  CHECK(set.digest != load(kMinimal, {"budgets.paths.global.token_budgets=[144, 288]"}).digest);
  CHECK(set.digest ==
        load(kMinimal + "[budgets.paths.local]\ntoken_budgets = [144, 288]\n").digest);
}

TEST_CASE("[budgets.paths.<name>]: invalid lists name the per-path key and where it was written") {
  const std::string head = kMinimal + "[budgets.paths.local]\n";
  CHECK(config_error(head + "token_budgets = []\n") ==
        "t.toml:3:1: budgets.paths.local: gives no budgets (token_budgets is empty and token_step "
        "is 0): list the path's budgets in budgets.paths.local.token_budgets, set "
        "budgets.paths.local.token_step, or remove [budgets.paths.local] so that the path uses "
        "budgets.token_budgets");
  CHECK(config_error(head + "token_budgets = [144, 0]\n") ==
        "t.toml:4:23: budgets.paths.local.token_budgets: budgets must be positive, got 0");
  CHECK(config_error(head + "token_budgets = [144, -144]\n")
            .find("budgets.paths.local.token_budgets: budgets must be positive, got -144") !=
        std::string::npos);
  CHECK(config_error(head + "token_budgets = [144, \"288\"]\n") ==
        "t.toml:4:23: budgets.paths.local.token_budgets[1]: expected an integer, got a string");
  CHECK(
      config_error(head + "token_budgets = [144, 2.5]\n")
          .find(
              "budgets.paths.local.token_budgets[1]: expected an integer, got a floating-point") !=
      std::string::npos);
  CHECK(config_error(head + "token_budgets = 144\n") ==
        "t.toml:4:17: budgets.paths.local.token_budgets: expected an array of integers, got an "
        "integer");
  CHECK(config_error(head + "token_budgets = [144, 4611686018427387904]\n") ==
        "t.toml:4:23: budgets.paths.local.token_budgets: must be <= 1073741824, the largest token "
        "budget encgraph plans, got 4611686018427387904; list smaller budgets");
  CHECK(config_error(head + "token_step = -144\n") ==
        "t.toml:4:14: budgets.paths.local.token_step: must be >= 0 (0: powers of two), got -144");
  CHECK(config_error(head + "token_step = \"144\"\n")
            .find("t.toml:4:14: budgets.paths.local.token_step: expected an integer, got a "
                  "string") == 0);
  CHECK(config_error(head + "token_step = 4611686018427387904\n")
            .find("budgets.paths.local.token_step: must be <= 1073741824") != std::string::npos);
  CHECK(config_error(head + "token_budgets = [144]\ntoken_step = 144\n")
            .find("budgets.paths.local.token_step: shapes generated budgets, but "
                  "budgets.paths.local.token_budgets lists them ([144]); remove one of the two") !=
        std::string::npos);
  CHECK(config_error(head).find("budgets.paths.local: gives no budgets") != std::string::npos);
  CHECK(config_error(head + "token_step = 0\n").find("gives no budgets") != std::string::npos);
  CHECK(config_error(head + "token_budget = [144]\n") ==
        "t.toml:4:1: unknown key 'budgets.paths.local.token_budget' (known keys in "
        "[budgets.paths.local]: token_budgets, token_step); did you mean 'token_budgets'?");
  CHECK(config_error(kMinimal + "[budgets.paths]\nlocal = [144]\n") ==
        "t.toml:4:9: budgets.paths.local: expected a table ([budgets.paths.local] with "
        "token_budgets or token_step), got an array");
  CHECK(config_error(kMinimal + "[budgets]\npaths = 3\n") ==
        "t.toml:4:9: budgets.paths: expected a table, got an integer");
  CHECK(config_error(kMinimal + "[budgets.paths.\"lo\\u0007cal\"]\ntoken_step = 144\n")
            .find("'budgets.paths.lo\\x07cal': a path name must be non-empty printable text") !=
        std::string::npos);
  CHECK(config_error(kMinimal + "[budgets.paths.\"\"]\ntoken_step = 144\n")
            .find("a path name must be non-empty") != std::string::npos);
  CHECK(config_error(kMinimal, {"budgets.paths.local.token_budgets=[0]"})
            .find("budgets.paths.local.token_budgets: budgets must be positive, got 0") !=
        std::string::npos);
  // Per-path lists longer than limits.max_graphs together: the planner's message at the table.
  CHECK(
      config_error(kMinimal +
                   "[limits]\nmax_graphs = 3\n[budgets.paths.global]\ntoken_budgets = [256, "
                   "512]\n[budgets.paths.local]\ntoken_budgets = [144, 288]\n")
          .find("t.toml:6:17: budgets.paths.global.token_budgets: the plan would capture at least "
                "4 graphs, more than "
                "limits.max_graphs (3): budgets.paths.global.token_budgets lists 2, "
                "budgets.paths.local.token_budgets lists 2 budgets") != std::string::npos);
  // ... also when a global list is set too: the message is about the per-path tables.
  const std::string both = config_error(
      kMinimal +
      "[limits]\nmax_graphs = 3\n[budgets]\ntoken_budgets = [256]\n[budgets.paths.global]\n"
      "token_budgets = [256, 512]\n[budgets.paths.local]\ntoken_budgets = [144, 288]\n");
  CHECK(both.find(": budgets.paths.global.token_budgets: the plan would capture at least") !=
        std::string::npos);
  CHECK(both.find("budgets.token_budgets:") == std::string::npos);
}

namespace {

// `encgraph <command>` on configs/toy_dual.toml (paths "global" and "local") with
// the global budgets [16, 32, 64] and `extra` --set arguments.
host_test::Outcome run_dual(const std::string& command, std::vector<std::string> extra) {
  std::vector<std::string> args = {std::string(EG_HOST_SOURCE_DIR) + "/configs/toy_dual.toml",
                                   "--set",
                                   "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]",
                                   "--set",
                                   "runtime.prefer_faster_path=false",
                                   "--set",
                                   "budgets.token_budgets=[16, 32, 64]",
                                   "--set",
                                   "budgets.max_items_per_batch=8",
                                   "--set",
                                   "workload.count=48",
                                   "--set",
                                   "output.report=\"\""};
  if (command != "check-config") args.insert(args.begin(), "--config");
  args.insert(args.end(), extra.begin(), extra.end());
  return host_test::run(command, args);
}

}  // namespace

TEST_CASE("budgets.paths reaches the plan of the two-path toy: check-config, run, the log") {
  const std::string local = "budgets.paths.local.token_budgets=[16, 64, 256, 2048]";
  const auto checked = run_dual("check-config", {"--set", local});
  INFO(checked.log);
  REQUIRE(checked.code == 0);
  CHECK(checked.out.find("  plan: token_budgets [16, 32, 64], max_items_per_batch 8") !=
        std::string::npos);
  CHECK(checked.out.find("  path budgets: global [16, 32, 64]; local [0, 16, 64, 256, 2048] "
                         "(budgets.paths.local)\n") != std::string::npos);
  // Without it both paths take the global list.
  const auto plain = run_dual("check-config", {});
  REQUIRE(plain.code == 0);
  CHECK(plain.out.find("  path budgets: global [16, 32, 64]; local [0, 16, 32, 64]\n") !=
        std::string::npos);
  // Structurally (no plugin asked) the lists are shown as written.
  const auto structural = run_dual("check-config", {"--set", local, "--structural"});
  REQUIRE(structural.code == 0);
  CHECK(structural.out.find("  budgets.paths.local: token_budgets [16, 64, 256, 2048]\n") !=
        std::string::npos);

  // The run: the graph manager's log and the report show the local path's own
  // list; its large batches (up to 1152 rows an item), eager without it (too
  // large for 64), now replay.
  const auto ran =
      run_dual("run", {"--set", local, "--set", "runtime.log_level=\"info\"", "--json"});
  INFO(ran.log);
  REQUIRE(ran.code == 0);
  CHECK(ran.log.find("budgets global: [16, 32, 64] rows; local: [0, 16, 64, 256, 2048] rows") !=
        std::string::npos);
  const auto r = nlohmann::json::parse(ran.out.substr(ran.out.find('{')));
  REQUIRE(r["plan"]["paths"].size() == 2);
  CHECK(r["plan"]["paths"][0]["token_budgets"] == nlohmann::json({16, 32, 64}));
  CHECK(r["plan"]["paths"][1]["token_budgets"] == nlohmann::json({0, 16, 64, 256, 2048}));
  const auto& m = r["results"][0];
  CHECK(m["graphs"] == 7);
  CHECK(m["paths"][1]["eager_reasons"]["too_large"] == 0);
  CHECK(m["paths"][1]["batches_graph"].get<int64_t>() > 0);
  // The text summary says what each path captures.
  const auto summary = run_dual("run", {"--set", local});
  REQUIRE(summary.code == 0);
  CHECK(summary.out.find("path budgets: global [16, 32, 64] ") != std::string::npos);
  CHECK(summary.out.find("; local [0, 16, 64, 256, 2048] ") != std::string::npos);
}

TEST_CASE("budgets.paths: a path the plugin lacks, or too many graphs, fail at engine creation") {
  const auto unknown =
      run_dual("check-config", {"--set", "budgets.paths.lokal.token_budgets=[16]"});
  CHECK(unknown.code == 2);
  CHECK(unknown.log.find("budgets.paths.lokal: the plugin has no path 'lokal' (its paths: "
                         "'global', 'local'); name one of them, or remove [budgets.paths.lokal]") !=
        std::string::npos);
  const auto ran = run_dual("run", {"--set", "budgets.paths.lokal.token_budgets=[16]"});
  CHECK(ran.code == 2);
  CHECK(ran.log.find("the plugin has no path 'lokal'") != std::string::npos);
  // The plugin's paths are known only then: loading the config alone is fine.
  CHECK(config_error(kMinimal, {"budgets.paths.lokal.token_budgets=[16]"}).empty());

  // 3 global graphs + 4 local ones over limits.max_graphs = 6.
  const auto many =
      run_dual("check-config", {"--set", "budgets.paths.local.token_budgets=[16, 64, 256, 2048]",
                                "--set", "limits.max_graphs=6"});
  CHECK(many.code == 2);
  CHECK(many.log.find("the plan would capture 7 graphs, more than limits.max_graphs (6): "
                      "budgets.token_budgets lists 3 budgets; budgets.paths.local.token_budgets "
                      "lists 4 budgets; the plugin's 2 paths take 3 + 4") != std::string::npos);
  CHECK(run_dual("check-config", {"--set", "budgets.paths.local.token_budgets=[16, 64, 256, 2048]",
                                  "--set", "limits.max_graphs=7"})
            .code == 0);
}

TEST_CASE("[serve] is read, each key bounded, max_pixels within limits.max_image_pixels") {
  const HostConfig d = load(kMinimal);
  CHECK(d.serve.host == "127.0.0.1");
  CHECK(d.serve.port == 8000);
  CHECK(d.serve.cache_bytes == int64_t{2} << 30);
  CHECK(d.serve.batches_in_flight == 0);  // picked by the device
  const HostConfig c = load(kMinimal +
                            "[serve]\nhost = \"0.0.0.0\"\nport = 0\nmax_queue_delay_us = 0\n"
                            "max_queue_items = 3\ncache_bytes = 0\nmax_items_per_request = 2\n"
                            "max_pixels = 100\nrequest_timeout_ms = 5\nthreads = 1\n"
                            "max_body_bytes = 2048\nbatches_in_flight = 2\n");
  CHECK(c.serve.host == "0.0.0.0");
  CHECK(c.serve.port == 0);
  CHECK(c.serve.max_queue_items == 3);
  CHECK(c.serve.max_pixels == 100);
  CHECK(c.serve.threads == 1);
  CHECK(c.serve.max_body_bytes == 2048);
  CHECK(c.serve.batches_in_flight == 2);
  // The serving keys change no embedding: the digest ignores them.
  CHECK(c.digest == d.digest);
  std::string e = config_error(kMinimal + "[serve]\nport = 70000\n");
  CHECK(e.find("serve.port") != std::string::npos);
  CHECK(e.find("[0, 65535]") != std::string::npos);
  e = config_error(kMinimal + "[serve]\nbatches_in_flight = 3\n");
  CHECK(e.find("serve.batches_in_flight") != std::string::npos);
  CHECK(e.find("[0, 2]") != std::string::npos);
  e = config_error(kMinimal + "[serve]\nthreads = 0\n");
  CHECK(e.find("serve.threads") != std::string::npos);
  e = config_error(kMinimal + "[serve]\nmax_pixels = 1000\n[limits]\nmax_image_pixels = 999\n");
  CHECK(e.find("limits.max_image_pixels") != std::string::npos);
  e = config_error(kMinimal + "[serve]\nhost = \"my host\"\n");
  CHECK(e.find("serve.host") != std::string::npos);
  e = config_error(kMinimal + "[serve]\nprot = 1\n");
  CHECK(e.find("unknown key 'serve.prot'") != std::string::npos);
}
