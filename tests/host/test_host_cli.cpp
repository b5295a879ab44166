// The subcommands as a user drives them: option parsing, --help, exit codes
// (0 ok, 2 usage or config, 1 other), --set on the command line, check-config
// with and without the plugin, and the JSON report's schema for run and bench.
#include "host_test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>

namespace fs = std::filesystem;
using host_test::run;

namespace {

const std::string kWorkload =
    "[workload]\ncount = 20\nseed = 1\nmin_side = 28\nmax_side = 112\nside_multiple = 28\n"
    "video_fraction = 0.25\nframes = 2\nrequest_size = 8\n";

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

void check_mode_schema(const nlohmann::json& m) {
  for (const char* key : {"mode",
                          "use_graphs",
                          "items",
                          "videos",
                          "tokens",
                          "requests",
                          "seconds",
                          "wall_seconds",
                          "items_per_s",
                          "tokens_per_s",
                          "latency_ms",
                          "hit_rate",
                          "padded_token_efficiency",
                          "graph_hits",
                          "graph_misses",
                          "batches_graph",
                          "batches_eager",
                          "batches_mixed",
                          "batches_eager_chosen",
                          "paths",
                          "graphs",
                          "capture_s",
                          "capture_phases_s",
                          "graph_memory_bytes"}) {
    CAPTURE(key);
    CHECK(m.contains(key));
  }
  // The phases of capture_s: each non-negative, together capture_s.
  double phases = 0.0;
  for (const char* key :
       {"prepare_device", "warmup", "capture", "instantiate", "calibrate", "other"}) {
    CAPTURE(key);
    REQUIRE(m["capture_phases_s"].contains(key));
    CHECK(m["capture_phases_s"][key].get<double>() >= 0.0);
    phases += m["capture_phases_s"][key].get<double>();
  }
  CHECK(m["capture_phases_s"].size() == 6);
  CHECK(phases <= m["capture_s"].get<double>() + 1e-6);
  CHECK(phases >= m["capture_s"].get<double>() - 1e-6);
  CHECK(m["items"] == 20);
  CHECK(m["requests"] == 3);  // 20 items in requests of 8
  CHECK(m["videos"].get<int>() > 0);
  CHECK(m["tokens"].get<int64_t>() >= 20);
  CHECK(m["seconds"].get<double>() > 0);
  CHECK(m["wall_seconds"].get<double>() >= m["seconds"].get<double>());
  CHECK(m["items_per_s"].get<double>() == doctest::Approx(20.0 / m["seconds"].get<double>()));
  CHECK(m["tokens_per_s"].get<double>() > m["items_per_s"].get<double>());
  const auto& l = m["latency_ms"];
  CHECK(l["p50"].get<double>() > 0);
  CHECK(l["p50"].get<double>() <= l["p99"].get<double>());
  CHECK(l["p99"].get<double>() <= l["max"].get<double>());
  CHECK(m["hit_rate"].get<double>() >= 0);
  CHECK(m["hit_rate"].get<double>() <= 1);
  CHECK(m["padded_token_efficiency"].get<double>() >= 0);
  CHECK(m["padded_token_efficiency"].get<double>() <= 1);
  CHECK(m["graph_hits"].get<int64_t>() + m["graph_misses"].get<int64_t>() == 20);
  // The toy's one path: its batches are the totals, every eager one has a reason.
  REQUIRE(m["paths"].size() == 1);
  const auto& p = m["paths"][0];
  CHECK(p["name"] == "default");
  CHECK(p["unit"].get<std::string>().size() > 0);
  CHECK(p["batches_graph"] == m["batches_graph"]);
  CHECK(p["batches_eager"] == m["batches_eager"]);
  CHECK(m["batches_mixed"] == 0);
  int64_t reasons = 0;
  for (const char* key : {"graphs_off", "too_large", "too_many_frames", "no_graph_for_axis_keys",
                          "chosen_as_faster"}) {
    CAPTURE(key);
    REQUIRE(p["eager_reasons"].contains(key));
    reasons += p["eager_reasons"][key].get<int64_t>();
  }
  CHECK(reasons == p["batches_eager"].get<int64_t>());
  if (m["use_graphs"] == false) CHECK(p["eager_reasons"]["graphs_off"] == p["batches_eager"]);
}

}  // namespace

TEST_CASE("--help prints each command's options and exits 0") {
  for (const char* command : {"run", "bench", "encode", "check-config", "verify", "plugins"}) {
    CAPTURE(command);
    const auto o = run(command, {"--help"});
    CHECK(o.code == 0);
    CHECK(o.out.find("--help") != std::string::npos);
    if (std::string(command) != "plugins") CHECK(o.out.find("--set") != std::string::npos);
  }
  CHECK(run("run", {"--help"}).out.find("usage: encgraph run --config FILE") == 0);
  CHECK(std::string(encgraph::host::usage_text()).find("  verify ") != std::string::npos);
}

TEST_CASE("usage errors exit 2") {
  CHECK(run("frobnicate", {}).code == 2);
  CHECK(run("run", {}).code == 2);  // --config is required
  CHECK(run("run", {"--config"}).code == 2);
  CHECK(run("run", {"--config", "x.toml", "--bogus"}).code == 2);
  CHECK(run("bench", {"--config", "a.toml", "extra"}).code == 2);
  CHECK(run("check-config", {}).code == 2);
  // A command without positional arguments refuses a stray one, even with a good config.
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config(kWorkload));
  const auto stray = run("run", {"--config", cfg.string(), "stray.png"});
  CHECK(stray.code == 2);
  CHECK(stray.out.empty());
}

TEST_CASE("config errors exit 2 with the message; other failures exit 1") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config());
  auto o = run("run", {"--config", (dir / "missing.toml").string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("missing.toml' does not exist") != std::string::npos);

  const auto typo = dir.write("typo.toml", host_test::toy_config("[workload]\ncuont = 3\n"));
  o = run("run", {"--config", typo.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find(typo.string() + ":14:1: unknown key 'workload.cuont'") != std::string::npos);

  o = run("run", {"-c", cfg.string(), "--set", "plugin.config.colour=3"});
  CHECK(o.code == 2);
  CHECK(o.log.find("toy: unknown config key 'colour' in [plugin.config]") != std::string::npos);

  o = run("run", {"-c", cfg.string(), "--set", "plugin.name=no_such_plugin"});
  CHECK(o.code == 2);  // a name no plugin provides is a config error
  CHECK(o.log.find("no_such_plugin") != std::string::npos);
}

TEST_CASE("run writes a report with the documented schema and sane numbers") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config(kWorkload));
  const fs::path report = dir / "reports" / "r.json";
  const auto o = run("run", {"--config", cfg.string(), "--report", report.string(), "--set",
                             "budgets.max_items_per_batch=8"});
  INFO(o.log);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("throughput") != std::string::npos);
  CHECK(o.out.find("latency p50") != std::string::npos);
  CHECK(o.out.find("batches ") != std::string::npos);
  CHECK(o.out.find("  path default (") != std::string::npos);
  const auto r = read_json(report);
  CHECK(r["schema"] == "encgraph.report/1");
  CHECK(r["command"] == "run");
  CHECK(r["encgraph_version"].get<std::string>().find("plugin ABI 1.") != std::string::npos);
  CHECK(r["config"]["file"] == cfg.string());
  CHECK(r["config"]["digest"].get<std::string>().size() == 16);
  CHECK(r["plugin"]["name"] == "toy");
  CHECK(r["plugin"]["out_hidden_size"] == 8);
  CHECK(r["plugin"]["out_dtype"] == "f32");
  // The toy's two outputs: its rows, and one pooled row per item.
  REQUIRE(r["plugin"]["outputs"].size() == 2);
  CHECK(r["plugin"]["outputs"][0]["name"] == "rows");
  CHECK(r["plugin"]["outputs"][0]["width"] == 8);
  CHECK(r["plugin"]["outputs"][0]["dtype"] == "f32");
  CHECK(r["plugin"]["outputs"][0]["rows_per_item"] == 0);
  CHECK(r["plugin"]["outputs"][1]["name"] == "pooled");
  CHECK(r["plugin"]["outputs"][1]["rows_per_item"] == 1);
  REQUIRE(r["plan"]["paths"].size() == 1);
  CHECK(r["plan"]["paths"][0]["token_budgets"] == r["plan"]["token_budgets"]);
  CHECK(r["device"]["type"] == "cpu");
  CHECK_FALSE(r["device"]["name"].get<std::string>().empty());
  CHECK(r["plan"]["max_items_per_batch"] == 8);
  CHECK(r["plan"]["token_budgets"].front() == 64);
  CHECK(r["workload"]["kind"] == "synthetic");
  CHECK(r["workload"]["items"] == 20);
  REQUIRE(r["results"].size() == 1);
  const auto& m = r["results"][0];
  check_mode_schema(m);
  CHECK(m["mode"] == "graphs");
  CHECK(m["graphs"] == r["plan"]["token_budgets"].size());
  CHECK(m["hit_rate"] == 1.0);  // every toy batch fits the largest budget
  CHECK(m["graph_memory_bytes"].get<int64_t>() > 0);
  CHECK(m["capture_s"].get<double>() > 0);
  CHECK(m["capture_phases_s"]["warmup"].get<double>() > 0);  // a forward per graph ran
  CHECK_FALSE(r.contains("comparison"));

  // --json prints the same document on stdout.
  const auto j = run("run", {"--config", cfg.string(), "--json"});
  REQUIRE(j.code == 0);
  const auto printed = nlohmann::json::parse(j.out);
  CHECK(printed["config"]["digest"] != r["config"]["digest"]);  // max_items_per_batch differs
  CHECK(printed["results"][0]["items"] == 20);
}

TEST_CASE("bench runs graphs and eager side by side with equal outputs") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config(kWorkload));
  const auto o = run("bench", {"--config", cfg.string(), "--report", (dir / "b.json").string()});
  INFO(o.log);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("graphs         eager") != std::string::npos);
  CHECK(o.out.find("speedup") != std::string::npos);
  const auto r = read_json(dir / "b.json");
  CHECK(r["command"] == "bench");
  REQUIRE(r["results"].size() == 2);
  check_mode_schema(r["results"][0]);
  check_mode_schema(r["results"][1]);
  CHECK(r["results"][0]["mode"] == "graphs");
  CHECK(r["results"][0]["hit_rate"] == 1.0);
  CHECK(r["results"][1]["mode"] == "eager");
  CHECK(r["results"][1]["hit_rate"] == 0.0);
  CHECK(r["results"][1]["graphs"] == 0);
  CHECK(r["results"][1]["capture_phases_s"]["warmup"] == 0.0);  // eager: nothing captured
  CHECK(r["results"][1]["batches_graph"] == 0);
  CHECK(r["comparison"]["max_abs_diff"] == 0.0);
  CHECK(r["comparison"]["compared_items"] == 20);  // every request, not only the first
  // Both outputs: every row of 8, and one pooled row of 8 per item.
  CHECK(r["comparison"]["compared_values"].get<int64_t>() ==
        r["results"][0]["tokens"].get<int64_t>() * 8 + 20 * 8);
  CHECK(r["comparison"]["speedup_items_per_s"].get<double>() > 0);
  CHECK(o.out.find("batches mixed") != std::string::npos);
  CHECK(o.out.find("  path default") != std::string::npos);
}

TEST_CASE("the report counts each path's batches and why they ran eagerly") {
  // toy_dual: the local path's rows outgrow the budgets the global path fits.
  const auto o = run(
      "run", {"--config", std::string(EG_HOST_SOURCE_DIR) + "/configs/toy_dual.toml", "--set",
              "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]", "--set",
              "runtime.log_level=\"warn\"", "--set", "runtime.prefer_faster_path=false", "--set",
              "budgets.token_budgets=[16, 32, 64]", "--set", "budgets.max_items_per_batch=8",
              "--set", "workload.count=48", "--set", "output.report=\"\"", "--json"});
  INFO(o.log);
  REQUIRE(o.code == 0);
  const auto r = nlohmann::json::parse(o.out);
  REQUIRE(r["plan"]["paths"].size() == 2);
  CHECK(r["plan"]["paths"][0]["name"] == "global");
  CHECK(r["plan"]["paths"][1]["name"] == "local");
  CHECK(r["plan"]["paths"][1]["unit"] == "rows");
  const auto& m = r["results"][0];
  REQUIRE(m["paths"].size() == 2);
  const auto& global = m["paths"][0];
  const auto& local = m["paths"][1];
  CHECK(m["batches_mixed"].get<int64_t>() > 0);
  CHECK(global["batches_eager"] == 0);
  CHECK(local["eager_reasons"]["too_large"].get<int64_t>() > 0);
  CHECK(local["eager_reasons"]["too_large"] == local["batches_eager"]);
  CHECK(local["eager_reasons"]["chosen_as_faster"] == 0);
  // Every batch sends a global row; a mixed one replayed global, ran local eagerly.
  CHECK(global["batches_graph"].get<int64_t>() ==
        m["batches_graph"].get<int64_t>() + m["batches_mixed"].get<int64_t>());
  CHECK(m["graph_hits"].get<int64_t>() + m["graph_misses"].get<int64_t>() == 48);
  CHECK(m["hit_rate"].get<double>() < 1.0);  // an item is a hit only if every path replayed

  const auto text = run(
      "run", {"--config", std::string(EG_HOST_SOURCE_DIR) + "/configs/toy_dual.toml", "--set",
              "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]", "--set",
              "runtime.log_level=\"warn\"", "--set", "runtime.prefer_faster_path=false", "--set",
              "budgets.token_budgets=[16, 32, 64]", "--set", "budgets.max_items_per_batch=8",
              "--set", "workload.count=48", "--set", "output.report=\"\""});
  REQUIRE(text.code == 0);
  CHECK(text.out.find("  path local (rows): 3 graphs, batches ") != std::string::npos);
  CHECK(text.out.find(" eager (too large ") != std::string::npos);
  CHECK(text.out.find("outputs rows (32, f32), pooled (32, f32)") != std::string::npos);
}

TEST_CASE("run writes embeddings for every item when output.embeddings is set") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config(kWorkload));
  const auto o = run("run", {"-c", cfg.string(), "--embeddings", (dir / "e.safetensors").string()});
  REQUIRE(o.code == 0);
  std::ifstream in(dir / "e.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, ' ');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const auto h = nlohmann::json::parse(header);
  // 20 items of two outputs, and the metadata: "<id>" the first, "<id>/pooled" the second.
  CHECK(h.size() == 41);
  CHECK(h.contains("synthetic/19"));
  CHECK(h.contains("synthetic/19/pooled"));
  CHECK(h["synthetic/19/pooled"]["shape"] == nlohmann::json({1, 8}));
  CHECK(h["__metadata__"]["outputs"] == "rows,pooled");
}

TEST_CASE("check-config validates with the plugin's plan, or structurally") {
  host_test::TempDir dir;
  const auto good = dir.write("good.toml", host_test::toy_config(kWorkload));
  auto o = run("check-config", {good.string()});
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("keys and values ok") != std::string::npos);
  CHECK(o.out.find("plan: token_budgets [64, 128, 256, 512, 1024, 2048, 4096]") !=
        std::string::npos);
  CHECK(o.out.find("ok\n") != std::string::npos);

  // Only the plugin's range shows this plan impossible.
  const auto big =
      dir.write("big.toml", host_test::toy_config("[budgets]\nmax_items_per_batch = 8192\n"));
  o = run("check-config", {big.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("8192") != std::string::npos);
  CHECK(run("check-config", {big.string(), "--structural"}).code == 0);
  // A CUDA config is not instantiated on the CPU: structural, and no GPU needed.
  o = run("check-config", {big.string(), "--set", "runtime.device=cuda"});
  CHECK(o.code == 0);
  CHECK(o.out.find("a CUDA config: no GPU is used here") != std::string::npos);

  const auto unbuilt = dir.write("unbuilt.toml",
                                 "[plugin]\nname = \"not_built_yet\"\n[budgets]\n"
                                 "token_budgets = [256, 1024]\n");
  o = run("check-config", {unbuilt.string()});
  CHECK(o.code == 0);
  CHECK(o.out.find("checked structurally only: the plugin is not on the search path yet") !=
        std::string::npos);
  CHECK(o.out.find("plan: token_budgets [256, 1024]") != std::string::npos);

  const auto weights = dir.write("w.toml", host_test::toy_config() + "\n");
  o = run("check-config", {weights.string(), "--set", "plugin.weights=/nonexistent/w.safetensors"});
  CHECK(o.code == 2);
  CHECK(o.log.find("plugin.weights: '/nonexistent/w.safetensors' does not exist") !=
        std::string::npos);

  const auto trace =
      dir.write("t.jsonl", "{\"height\": 28, \"width\": 28}\n{\"height\": 0, \"width\": 28}\n");
  o = run("check-config", {good.string(), "--set", "workload.kind=trace", "--set",
                           "workload.trace=" + trace.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find(trace.string() + ":2: 'height' must be a positive integer") !=
        std::string::npos);
}

// Keys and values only: the device is left to "auto" so a build without CUDA
// (whose toy plugin is CPU-only) passes too.
TEST_CASE("the shipped configs pass check-config") {
  // Every file in configs/, so a new one is checked without being listed here.
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(EG_HOST_SOURCE_DIR) + "/configs"))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().filename().string());
  REQUIRE(names.size() >= 8);
  for (const std::string& name : names) {
    CAPTURE(name);
    const auto o =
        run("check-config", {std::string(EG_HOST_SOURCE_DIR) + "/configs/" + name, "--structural",
                             "--set", "runtime.device=auto", "--set",
                             "runtime.plugin_dirs=[\"" + host_test::plugin_dir() + "\"]"});
    INFO(o.log);
    CHECK(o.code == 0);
  }
}

TEST_CASE("a config that is no regular file exits 2 at once, naming it") {
  host_test::TempDir dir;
  const auto fifo = dir / "fifo.toml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto o = run("run", {"--config", fifo.string()});  // must not wait for a writer
  CHECK(o.code == 2);
  CHECK(o.log.find("config '" + fifo.string() + "' is a FIFO") != std::string::npos);
  o = run("check-config", {"/dev/zero"});
  CHECK(o.code == 2);
  CHECK(o.log.find("config '/dev/zero' is a character device") != std::string::npos);
  o = run("check-config", {dir.path().string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("is a directory") != std::string::npos);
}

TEST_CASE("a --set injecting a table writes nothing and exits 2, naming the argument") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config("[workload]\ncount = 4\n"));
  const auto report = dir / "r.json";
  const std::string set = "plugin.name=\"toy\"\n[output]\nreport=\"" + report.string() + "\"";
  const auto o = run("run", {"-c", cfg.string(), "--set", set});
  CHECK(o.code == 2);
  CHECK(o.log.find("--set plugin.name=\"toy\"\\n[output]\\nreport=") != std::string::npos);
  CHECK(o.log.find("raw control character") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(report));
}

TEST_CASE("token_step = 1 fails before capturing, naming the count, the keys and the fix") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config("[workload]\ncount = 4\n"));
  const auto report = dir / "r.json";
  auto o = run("run", {"-c", cfg.string(), "--set", "budgets.token_step=1", "--set",
                       "output.report=" + report.string()});
  CHECK(o.code == 2);
  CHECK(o.log.find("the plan would capture 4033 graphs, more than limits.max_graphs (256)") !=
        std::string::npos);
  CHECK(o.log.find("budgets.token_step = 1") != std::string::npos);
  CHECK(o.log.find("capture-axis") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(report));
  o = run("check-config", {cfg.string(), "--set", "budgets.token_step=1"});
  CHECK(o.code == 2);
  CHECK(o.log.find("would capture 4033 graphs") != std::string::npos);
  // Raised, the limit lets the same plan through check-config.
  o = run("check-config",
          {cfg.string(), "--set", "budgets.token_step=1", "--set", "limits.max_graphs=5000"});
  CHECK(o.code == 0);
}

TEST_CASE("workload.count and request_size past [limits] exit 2 before any item is made") {
  host_test::TempDir dir;
  const auto cfg = dir.write("c.toml", host_test::toy_config());
  auto o = run("check-config", {cfg.string(), "--set", "workload.count=1000000000000"});
  CHECK(o.code == 2);
  CHECK(o.log.find("--set workload.count=1000000000000: workload.count: 1000000000000 exceeds "
                   "limits.max_items (1000000)") != std::string::npos);
  o = run("run", {"-c", cfg.string(), "--set", "workload.request_size=100000"});
  CHECK(o.code == 2);
  CHECK(o.log.find("limits.max_request_size (4096)") != std::string::npos);
}
