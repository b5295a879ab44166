// Data parallelism through the host on CPU ranks: runtime.data_parallel's
// checks (each error names the key and where it was written), a data-parallel
// engine's rows equal a single runtime's item by item (synthetic items and
// decoded files), and `run` / `bench` end to end with the world size in the
// report and summary. CUDA ranks need GPUs: not tested here.
#include "cli.hpp"
#include "config.hpp"
#include "executor.hpp"
#include "host_test_support.hpp"
#include "safetensors_reader.hpp"
#include "test_images.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>

using namespace encgraph::host;
using host_test::config_error;
using host_test::run;
namespace fs = std::filesystem;

namespace {

const std::string kMinimal = "[plugin]\nname = \"toy\"\n";

// configs/toy.toml (images and videos, device "cpu") made small and found in
// the build's plugin folder, with the given extra overrides.
std::vector<std::string> toy_args(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--config", std::string(EG_HOST_SOURCE_DIR) + "/configs/toy.toml",
      "--set",    "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]",
      "--set",    "runtime.log_level=\"warn\"",
      "--set",    "runtime.prefer_faster_path=false",
      "--set",    "workload.count=40",
      "--set",    "workload.request_size=12",
      "--set",    "output.report=\"\""};
  for (const auto& e : extra) args.push_back(e);
  return args;
}

// Each item's rows, by id, as the engine computes them request by request.
std::map<std::string, std::vector<float>> rows_by_id(encgraph::Engine& engine,
                                                     const std::vector<WorkItem>& work,
                                                     Measurement* measured = nullptr) {
  std::map<std::string, std::vector<float>> rows;
  ExecOptions options;
  options.request_size = 7;  // requests of uneven shares over the ranks
  options.warmup_requests = 1;
  options.progress = false;
  const Measurement m = execute_workload(engine, work, options,
                                         [&](const auto& items, const encgraph::Result& result) {
                                           REQUIRE(result.size() == items.size());
                                           for (size_t i = 0; i < items.size(); ++i)
                                             rows[items[i]->id] = result.item_as_float(i);
                                         });
  if (measured) *measured = m;
  return rows;
}

void check_equal_rows(const std::map<std::string, std::vector<float>>& expected,
                      const std::map<std::string, std::vector<float>>& got) {
  REQUIRE(got.size() == expected.size());
  for (const auto& [id, rows] : expected) {
    CAPTURE(id);
    REQUIRE(got.count(id) == 1);
    CHECK_FALSE(rows.empty());
    CHECK(got.at(id) == rows);
  }
}

nlohmann::json run_json(const std::vector<std::string>& extra, const std::string& command = "run") {
  auto args = toy_args(extra);
  args.push_back("--json");
  const auto o = run(command, args);
  INFO(o.log);
  REQUIRE(o.code == 0);
  return nlohmann::json::parse(o.out);
}

}  // namespace

TEST_CASE("runtime.data_parallel is read from the file and from --set; empty is off") {
  CHECK(load_config_text(kMinimal, "t.toml", {}).data_parallel.empty());
  const HostConfig file = load_config_text(
      kMinimal + "[runtime]\ndata_parallel = [\"cpu\", \"cpu\", \"cpu\"]\n", "t.toml", {});
  CHECK(file.data_parallel == std::vector<std::string>{"cpu", "cpu", "cpu"});
  CHECK(execution_device(file) == "cpu");
  const HostConfig set =
      load_config_text(kMinimal, "t.toml", {"runtime.data_parallel=[\"cuda:0\", \"cuda:1\"]"});
  CHECK(set.data_parallel == std::vector<std::string>{"cuda:0", "cuda:1"});
  CHECK(execution_device(set) == "cuda:0");
  CHECK(load_config_text(kMinimal + "[runtime]\ndata_parallel = [\"cpu\", \"cpu\"]\n", "t.toml",
                         {"runtime.data_parallel=[]"})
            .data_parallel.empty());
  // A device of the same kind, or "auto", is accepted (and not used).
  for (const char* device : {"cpu", "auto"})
    CHECK(config_error(kMinimal + "[runtime]\ndevice = \"" + device +
                       "\"\ndata_parallel = [\"cpu\", \"cpu\"]\n")
              .empty());
  CHECK(config_error(kMinimal + "[runtime]\ndevice = \"cuda:1\"\n"
                                "data_parallel = [\"cuda:0\", \"cuda:1\"]\n")
            .empty());
}

TEST_CASE("runtime.data_parallel enters the digest only when set") {
  const HostConfig off = load_config_text(kMinimal, "t.toml", {});
  const HostConfig on =
      load_config_text(kMinimal, "t.toml", {"runtime.data_parallel=[\"cpu\", \"cpu\"]"});
  CHECK(canonical_config(off).find("data_parallel") == std::string::npos);
  CHECK(canonical_config(on).find("runtime.data_parallel = [cpu, cpu]\n") != std::string::npos);
  CHECK(off.digest != on.digest);
}

TEST_CASE("bad runtime.data_parallel values name the key, where it was written, and the fix") {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[runtime]\ndata_parallel = [\"cpu\"]\n",
       "t.toml:4:17: runtime.data_parallel: one device is not data parallel; set runtime.device = "
       "\"cpu\" instead"},
      {"[runtime]\ndata_parallel = [\"cpu\", \"cuda:0\"]\n",
       "t.toml:4:25: runtime.data_parallel[1]: \"cuda:0\" mixed with \"cpu\": the ranks must be "
       "all \"cpu\" or all \"cuda:N\""},
      {"[runtime]\ndata_parallel = [\"cuda:1\", \"cpu\"]\n",
       "runtime.data_parallel[1]: \"cpu\" mixed with \"cuda:1\""},
      {"[runtime]\ndata_parallel = [\"cpu\", \"auto\"]\n",
       "t.toml:4:25: runtime.data_parallel[1]: \"auto\" is not a data-parallel device; use \"cpu\" "
       "or \"cuda:N\""},
      {"[runtime]\ndata_parallel = [\"cuda\", \"cuda:1\"]\n",
       "runtime.data_parallel[0]: \"cuda\" is not a data-parallel device"},
      {"[runtime]\ndata_parallel = [\"cuda:0\", \"cuda:1\", \"cuda:0\"]\n",
       "runtime.data_parallel[2]: \"cuda:0\" is listed twice"},
      {"[runtime]\ndata_parallel = \"cpu\"\n",
       "t.toml:4:17: runtime.data_parallel: expected an array of strings, got a string"},
      {"[runtime]\ndata_parallel = [0, 1]\n",
       "t.toml:4:18: runtime.data_parallel[0]: expected a string, got an integer"},
      {"[runtime]\ndevice = \"cuda:0\"\ndata_parallel = [\"cpu\", \"cpu\"]\n",
       "t.toml:4:10: runtime.device = \"cuda:0\" conflicts with runtime.data_parallel, whose ranks "
       "run on the CPU"},
      {"[runtime]\ndevice = \"cpu\"\ndata_parallel = [\"cuda:0\", \"cuda:1\"]\n",
       "runtime.device = \"cpu\" conflicts with runtime.data_parallel, whose ranks run on CUDA"},
      {"[runtime]\ndata_parallell = [\"cpu\", \"cpu\"]\n",
       "t.toml:4:1: unknown key 'runtime.data_parallell'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string e = config_error(kMinimal + c.text);
    CHECK(e.find(c.expect) != std::string::npos);
  }
  CHECK(config_error(kMinimal + "[runtime]\ndata_parallell = 1\n")
            .find("did you mean 'data_parallel'?") != std::string::npos);
  // From --set: the argument stands for the line; unquoted elements get a hint.
  CHECK(config_error(kMinimal, {"runtime.data_parallel=[\"cpu\"]"})
            .find("--set runtime.data_parallel=[\"cpu\"]: runtime.data_parallel: one device") == 0);
  CHECK(config_error(kMinimal, {"runtime.data_parallel=[cpu, cpu]"}) ==
        "--set runtime.data_parallel=[cpu, cpu]: runtime.data_parallel: expected an array of "
        "strings, got a string (quote each element: [\"a\", \"b\"])");
}

TEST_CASE("a data-parallel engine's rows equal a single runtime's, item by item") {
  // configs/toy.toml's workload (images and videos), smaller.
  const HostConfig c = load_config(
      std::string(EG_HOST_SOURCE_DIR) + "/configs/toy.toml",
      {"runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]", "runtime.log_level=\"warn\"",
       "runtime.prefer_faster_path=false", "workload.count=45"});
  const std::vector<WorkItem> work = build_workload(c.workload);
  REQUIRE(work.size() == 45);

  auto single = make_engine(c.runtime, {});
  single->capture();
  Measurement single_m;
  const auto expected = rows_by_id(*single, work, &single_m);
  CHECK(single_m.videos > 0);

  for (const std::vector<std::string>& devices :
       {std::vector<std::string>{"cpu", "cpu"}, std::vector<std::string>{"cpu", "cpu", "cpu"}}) {
    CAPTURE(devices.size());
    auto dp = make_engine(c.runtime, devices);
    CHECK(dp->world_size() == static_cast<int>(devices.size()));
    CHECK(rank_device_names(*dp) == devices);
    dp->capture();
    Measurement m;
    check_equal_rows(expected, rows_by_id(*dp, work, &m));
    // The same workload measured the same way; statistics summed over ranks.
    CHECK(m.items == single_m.items);
    CHECK(m.tokens == single_m.tokens);
    CHECK(m.videos == single_m.videos);
    CHECK(m.requests == single_m.requests);
    CHECK(m.latencies.size() == static_cast<size_t>(m.requests));
    CHECK(m.stats.graph_hits + m.stats.graph_misses == m.items);  // warm-up excluded
    // Every rank captures the same plan: the graph figures are one rank's.
    CHECK(m.stats.num_graphs == single->stats().num_graphs);
    CHECK(m.stats.token_budgets == single->stats().token_budgets);
  }
}

TEST_CASE("decoded image files run data parallel: their pixels live through the call") {
  host_test::TempDir dir;
  std::vector<std::string> files;
  for (int i = 0; i < 9; ++i) {
    const fs::path p = dir / ("img" + std::to_string(i) + ".png");
    host_test::write_gradient(p, 28 * (1 + i % 3), 28 * (1 + (i / 3) % 2), i * 29);
    files.push_back(p.string());
  }
  const HostConfig c = load_config_text(host_test::toy_config(), "t.toml", {});
  const std::vector<WorkItem> work = file_workload(files);
  auto single = make_engine(c.runtime, {});
  auto dp = make_engine(c.runtime, {"cpu", "cpu", "cpu"});
  const auto expected = rows_by_id(*single, work);
  // Pictures of one size but other pixels give other rows: the comparison
  // can tell them apart.
  CHECK(expected.at(files[0]).size() == expected.at(files[6]).size());
  CHECK(expected.at(files[0]) != expected.at(files[6]));
  check_equal_rows(expected, rows_by_id(*dp, work));
}

TEST_CASE("run with data_parallel reports the world size and the single run's totals") {
  const auto single = run_json({});
  const auto dp = run_json({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\"]"});
  CHECK_FALSE(single.contains("data_parallel"));
  REQUIRE(dp.contains("data_parallel"));
  CHECK(dp["data_parallel"]["world_size"] == 2);
  CHECK(dp["data_parallel"]["devices"] == nlohmann::json({"cpu", "cpu"}));
  CHECK(dp["device"]["type"] == "cpu");
  CHECK(dp["plan"] == single["plan"]);
  REQUIRE(dp["results"].size() == 1);
  const auto& m = dp["results"][0];
  const auto& s = single["results"][0];
  CHECK(m["mode"] == "graphs");
  for (const char* key : {"items", "videos", "tokens", "requests"}) {
    CAPTURE(key);
    CHECK(m[key] == s[key]);
  }
  CHECK(m["items"] == 40);
  CHECK(m["requests"] == 4);  // 40 items in requests of 12
  CHECK(m["graph_hits"].get<int64_t>() + m["graph_misses"].get<int64_t>() == 40);
  // The ranks capture the same plan: graphs and graph memory are one rank's.
  CHECK(m["graphs"] == s["graphs"]);
  CHECK(m["graph_memory_bytes"] == s["graph_memory_bytes"]);
  CHECK(m["padded_token_efficiency"].get<double>() > 0);
  CHECK(m["latency_ms"]["p50"].get<double>() > 0);
  CHECK(dp["config"]["digest"] != single["config"]["digest"]);

  const auto summary = run("run", toy_args({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\"]"}));
  INFO(summary.log);
  REQUIRE(summary.code == 0);
  CHECK(summary.out.find("plugin toy on 2 data-parallel ranks (cpu, cpu), config") !=
        std::string::npos);
  CHECK(summary.out.find("items 40 (") != std::string::npos);

  // Eager data parallel: no graphs on any rank.
  const auto eager = run_json({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\", \"cpu\"]",
                               "--set", "runtime.use_graphs=false"});
  CHECK(eager["data_parallel"]["world_size"] == 3);
  CHECK(eager["results"][0]["mode"] == "eager");
  CHECK(eager["results"][0]["graphs"] == 0);
  CHECK(eager["results"][0]["graph_misses"] == 40);
}

TEST_CASE("bench with data_parallel compares data-parallel graphs and eager") {
  const auto r = run_json({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\", \"cpu\"]"}, "bench");
  CHECK(r["command"] == "bench");
  CHECK(r["data_parallel"]["world_size"] == 3);
  REQUIRE(r["results"].size() == 2);
  const auto& graphs = r["results"][0];
  const auto& eager = r["results"][1];
  CHECK(graphs["mode"] == "graphs");
  CHECK(eager["mode"] == "eager");
  for (const auto* m : {&graphs, &eager}) {
    CHECK((*m)["items"] == 40);
    CHECK((*m)["requests"] == 4);
    CHECK((*m)["graph_hits"].get<int64_t>() + (*m)["graph_misses"].get<int64_t>() == 40);
  }
  CHECK(graphs["tokens"] == eager["tokens"]);
  CHECK(graphs["graphs"].get<int64_t>() > 0);
  CHECK(graphs["graphs"] == r["plan"]["token_budgets"].size());  // one rank's graphs
  CHECK(eager["graphs"] == 0);
  CHECK(eager["batches_graph"] == 0);
  CHECK(r["comparison"]["max_abs_diff"] == 0.0);
  CHECK(r["comparison"]["speedup_items_per_s"].get<double>() > 0);

  const auto table =
      run("bench", toy_args({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\", \"cpu\"]"}));
  INFO(table.log);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("bench: plugin toy on 3 data-parallel ranks (cpu, cpu, cpu), 40 items") !=
        std::string::npos);
  CHECK(table.out.find("max |graphs - eager| over 40 items, every output = 0") !=
        std::string::npos);
  CHECK(r["comparison"]["compared_items"] == 40);
}

TEST_CASE("data-parallel configuration errors exit 2 and name the key") {
  struct Case {
    std::string value, expect;
  };
  const std::vector<Case> cases = {
      {"runtime.data_parallel=[\"cpu\", \"cuda:0\"]",
       "runtime.data_parallel[1]: \"cuda:0\" mixed with \"cpu\""},
      {"runtime.data_parallel=[\"cpu\"]", "runtime.data_parallel: one device is not data parallel"},
      {"runtime.data_parallel=\"cpu\"",
       "runtime.data_parallel: expected an array of strings, got a string"},
      {"runtime.data_parallel=[1, 2]",
       "runtime.data_parallel[0]: expected a string, got an integer"},
  };
  for (const char* command : {"run", "bench"})
    for (const auto& c : cases) {
      CAPTURE(command);
      CAPTURE(c.value);
      const auto o = run(command, toy_args({"--set", c.value}));
      CHECK(o.code == 2);
      CHECK(o.log.find("--set " + c.value + ": " + c.expect) != std::string::npos);
    }
  // configs/toy.toml says device = "cpu": GPU ranks conflict with it.
  const auto conflict =
      run("run", toy_args({"--set", "runtime.data_parallel=[\"cuda:0\", \"cuda:1\"]"}));
  CHECK(conflict.code == 2);
  CHECK(conflict.log.find("runtime.device = \"cpu\" conflicts with runtime.data_parallel") !=
        std::string::npos);
}

TEST_CASE("embeddings written data parallel equal a single runtime's, tensor by tensor") {
  host_test::TempDir dir;
  const std::string two = "runtime.data_parallel=[\"cpu\", \"cpu\", \"cpu\"]";
  const fs::path single = dir / "single.safetensors", ranks = dir / "ranks.safetensors";
  auto o = run("run", toy_args({"--embeddings", single.string()}));
  INFO(o.log);
  REQUIRE(o.code == 0);
  o = run("run", toy_args({"--set", two, "--embeddings", ranks.string()}));
  INFO(o.log);
  REQUIRE(o.code == 0);
  const auto expected = host_test::read_safetensors(single);
  const auto got = host_test::read_safetensors(ranks);
  size_t tensors = 0;
  for (const auto& [name, entry] : expected.header.items()) {
    if (name == "__metadata__") continue;
    CAPTURE(name);
    REQUIRE(got.header.contains(name));
    CHECK(got.header[name]["shape"] == entry["shape"]);
    const std::vector<float> rows = expected.floats(name);
    CHECK_FALSE(rows.empty());
    CHECK(got.floats(name) == rows);
    ++tensors;
  }
  CHECK(tensors == 80);  // workload.count in toy_args, of the toy's two outputs
  CHECK(got.header.size() == expected.header.size());
  // encode takes the same path.
  o = run("encode", toy_args({"--set", two, "-o", (dir / "encoded.safetensors").string()}));
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(fs::exists(dir / "encoded.safetensors"));
}

TEST_CASE("check-config shows the ranks and plans CPU ranks with the plugin") {
  auto args = toy_args({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\", \"cpu\"]"});
  args.erase(args.begin());  // check-config takes the file as its argument
  const auto o = run("check-config", args);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("data parallel: 3 ranks (cpu, cpu, cpu)") != std::string::npos);
  CHECK(o.out.find("plan: token_budgets [64, 128") != std::string::npos);

  // GPU ranks: structural, no GPU used (the file's device is made "auto").
  auto cuda = toy_args(
      {"--set", "runtime.device=auto", "--set", "runtime.data_parallel=[\"cuda:0\", \"cuda:1\"]"});
  cuda.erase(cuda.begin());
  const auto g = run("check-config", cuda);
  INFO(g.log);
  CHECK(g.code == 0);
  CHECK(g.out.find("a CUDA config: no GPU is used here") != std::string::npos);
}

TEST_CASE("a data-parallel item the plugin rejects is named in the error") {
  const auto o = run(
      "run", {"--config", std::string(EG_HOST_SOURCE_DIR) + "/configs/qwen2_5_vl_small_cpu.toml",
              "--set", "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]", "--set",
              "runtime.data_parallel=[\"cpu\", \"cpu\"]", "--set", "workload.video_fraction=1.0",
              "--set", "workload.frames=6", "--set", "output.report=\"\""});
  CHECK(o.code != 0);
  // Named whichever call refuses it first: its spec from the geometry
  // (item_spec_for_desc) or item_create.
  CHECK(o.log.find("item 'synthetic/0': plugin 'qwen2_5_vl': item_") != std::string::npos);
  CHECK(o.log.find("max_frames_per_video") != std::string::npos);
}

TEST_CASE(
    "bench refuses an empty workload; the digest ignores runtime.device under data parallel") {
  const auto o = run("bench", toy_args({"--set", "workload.count=0"}));
  CHECK(o.code == 2);
  CHECK(o.log.find("bench needs at least one item") != std::string::npos);
  const std::string ranks = "runtime.data_parallel=[\"cpu\", \"cpu\"]";
  const auto a = run_json({"--set", ranks, "--set", "runtime.device=\"auto\""});
  const auto b = run_json({"--set", ranks, "--set", "runtime.device=\"cpu\""});
  REQUIRE(a["config"]["digest"].is_string());
  CHECK(a["config"]["digest"] == b["config"]["digest"]);
}
