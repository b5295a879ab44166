// `encgraph verify`: the comparison at a dtype's tolerance (NaN and infinities
// in one mode only, rows counts), the statistics rules, and the command end to
// end: the shipped toy config passes, the test plugin whose cu_seqlens is
// zero-padded where repeat-last is needed fails with the buffer named, a
// plugin whose spec from a description differs from its item's is caught, bad
// input exits 2.
#include "host_test_support.hpp"
#include "verify.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>

using namespace encgraph::host;
using host_test::run;

namespace {

std::vector<std::string> toy_args(const std::vector<std::string>& extra,
                                  const std::string& config = "configs/toy.toml") {
  std::vector<std::string> args = {
      "--config", std::string(EG_HOST_SOURCE_DIR) + "/" + config,
      "--set",    "runtime.plugin_dirs=" + host_test::plugin_dirs_with_tests(),
      "--set",    "runtime.log_level=\"warn\"",
      "--set",    "workload.count=24",
      "--set",    "workload.request_size=8"};
  for (const auto& e : extra) args.push_back(e);
  return args;
}

bool plugin_built(const std::string& name) {
  const std::string file = "/libencgraph_" + name + ".so";
  return std::filesystem::exists(host_test::plugin_dir() + file) ||
         std::filesystem::exists(host_test::test_plugin_dir() + file);
}

encgraph::Stats one_path_stats() {
  encgraph::Stats s;
  s.paths.resize(1);
  s.paths[0].name = "default";
  return s;
}

}  // namespace

TEST_CASE("tolerances follow the output's dtype") {
  CHECK(tolerance_for(EG_DTYPE_F32).relative == doctest::Approx(1e-4));
  CHECK(tolerance_for(EG_DTYPE_F16).relative == doctest::Approx(5e-3));
  CHECK(tolerance_for(EG_DTYPE_BF16).relative == doctest::Approx(4e-2));
  CHECK(tolerance_for(EG_DTYPE_F64).relative < 1e-6);
  CHECK(tolerance_for(EG_DTYPE_I32).relative == 0.0);
}

TEST_CASE("outputs compare at the tolerance scaled by the row's magnitude") {
  const Tolerance t{1e-4};
  // Two rows of 3: a small row (scale 1) and a large one (scale 1000).
  const std::vector<float> eager = {0.5f, -0.25f, 0.0f, 1000.0f, 2.0f, -3.0f};
  std::vector<float> graph = eager;
  graph[1] += 5e-5f;  // within 1e-4 of a row scaled 1
  graph[4] += 0.05f;  // within 1e-4 x 1000 = 0.1
  Comparison c = compare_output(graph, eager, 3, t);
  CHECK_FALSE(c.first);
  CHECK(c.rows == 2);
  CHECK(c.values == 6);
  CHECK(c.max_abs_diff == doctest::Approx(0.05).epsilon(1e-3));

  graph[2] = 3e-4f;  // beyond 1e-4 in the small row
  c = compare_output(graph, eager, 3, t);
  REQUIRE(c.first);
  CHECK(c.first->row == 0);
  CHECK(c.first->column == 2);
  CHECK(c.first->graph == doctest::Approx(3e-4));
  CHECK(c.first->eager == 0.0);
  CHECK(c.first->why == "beyond the tolerance");

  graph = eager;
  graph[4] += 0.2f;  // beyond 0.1 in the large row
  c = compare_output(graph, eager, 3, t);
  REQUIRE(c.first);
  CHECK(c.first->row == 1);
  CHECK(c.first->column == 1);
  CHECK(c.first->allowed == doctest::Approx(0.1));
}

TEST_CASE("NaN or an infinity in one mode only is a difference; in both it is not") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> eager = {1.0f, 2.0f, nan, 4.0f};
  std::vector<float> graph = {1.0f, 2.0f, nan, 4.0f};
  Comparison c = compare_output(graph, eager, 2, {1e-4});
  CHECK_FALSE(c.first);
  CHECK(c.nonfinite_both == 1);

  graph[0] = nan;  // unwritten (poisoned) row in the graph only
  c = compare_output(graph, eager, 2, {1e-4});
  REQUIRE(c.first);
  CHECK(c.first->row == 0);
  CHECK(c.first->column == 0);
  CHECK(c.first->why == "NaN in the graph's output only");

  graph = {1.0f, 2.0f, 3.0f, 4.0f};
  c = compare_output(graph, eager, 2, {1e-4});
  REQUIRE(c.first);
  CHECK(c.first->row == 1);
  CHECK(c.first->why == "NaN in the eager output only");

  graph = {1.0f, inf, nan, 4.0f};
  c = compare_output(graph, eager, 2, {1e-4});
  REQUIRE(c.first);
  CHECK(c.first->column == 1);
  CHECK(c.first->why == "an infinity in the graph's output only");
}

TEST_CASE("a rows count that differs is a difference at the first missing row") {
  const std::vector<float> eager = {1, 2, 3, 4, 5, 6};
  const std::vector<float> graph = {1, 2, 3, 4};
  const Comparison c = compare_output(graph, eager, 2, {1e-4});
  REQUIRE(c.first);
  CHECK(c.first->row == 2);
  CHECK(c.first->why == "the graph gives 2 rows, the eager run 3");
  // Integer outputs compare exactly.
  CHECK(compare_output({1, 2}, {1, 2}, 2, {0.0}).first == std::nullopt);
  CHECK(compare_output({1, 3}, {1, 2}, 2, {0.0}).first);
}

TEST_CASE("padding logics have names") {
  CHECK(padding_logic_name(EG_PAD_ZERO) == "zero");
  CHECK(padding_logic_name(EG_PAD_REPEAT_LAST) == "repeat-last");
  CHECK(padding_logic_name(EG_PAD_CALLBACK) == "callback");
  CHECK(padding_logic_name(7) == "logic 7");
}

TEST_CASE("statistics rules: honest counts pass, the issue's lies are caught") {
  encgraph::Stats d = one_path_stats();
  d.graph_hits = 24;
  d.batches_graph = 3;
  d.paths[0].batches_graph = 3;
  d.real_tokens = d.paths[0].real_tokens = 100;
  d.budget_tokens = d.paths[0].budget_tokens = 128;
  CHECK(check_planned_stats(d, 24).empty());

  // Hits counted once per replayed path: 34 hits for 24 items.
  encgraph::Stats twice = d;
  twice.graph_hits = 34;
  CHECK_FALSE(check_planned_stats(twice, 24).empty());
  // A batch whose second path ran eagerly reported as a graph batch with no reason.
  encgraph::Stats dual = d;
  dual.paths.resize(2);
  dual.paths[1].name = "local";
  dual.paths[1].batches_eager = 1;
  const auto problems = check_planned_stats(dual, 24);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems[0].find("path 'local': eager reasons sum to 0, batches_eager 1") !=
        std::string::npos);
  // Mixed batches with one path.
  encgraph::Stats mixed = d;
  mixed.batches_mixed = 1;
  CHECK_FALSE(check_planned_stats(mixed, 24).empty());

  encgraph::Stats e = one_path_stats();
  e.graph_misses = 1;
  e.batches_eager = 1;
  e.paths[0].batches_eager = 1;
  e.paths[0].eager_by_reason[static_cast<int>(encgraph::EagerReason::GraphsOff)] = 1;
  CHECK(check_eager_stats(e).empty());
  encgraph::Stats wrong_reason = e;
  wrong_reason.paths[0].eager_by_reason = {};
  wrong_reason.paths[0].eager_by_reason[static_cast<int>(encgraph::EagerReason::TooLarge)] = 1;
  CHECK_FALSE(check_eager_stats(wrong_reason).empty());
  encgraph::Stats hit = e;
  hit.graph_hits = 1;
  hit.graph_misses = 0;
  CHECK_FALSE(check_eager_stats(hit).empty());
}

TEST_CASE("verify passes the shipped toy config and reports its counts") {
  const auto o = run("verify", toy_args({}));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("verify: plugin toy ") == 0);
  CHECK(o.out.find("memory poisoned") != std::string::npos);
  CHECK(o.out.find("OK: 24 items, 2 outputs (rows, pooled), ") != std::string::npos);
  CHECK(o.out.find("graph hit rate 100.0%") != std::string::npos);
  CHECK(o.out.find("buffers (padding logic): ") != std::string::npos);
  CHECK(o.out.find("cu_seqlens (repeat-last)") != std::string::npos);
  CHECK(o.out.find("statistics: consistent") != std::string::npos);
}

TEST_CASE("verify captures graphs even when the config turns them off; data parallel uses rank 0") {
  auto o = run("verify", toy_args({"--set", "runtime.use_graphs=false"}));
  INFO(o.out);
  CHECK(o.code == 0);
  CHECK(o.out.find("graph hit rate 100.0%") != std::string::npos);
  o = run("verify", toy_args({"--set", "runtime.data_parallel=[\"cpu\", \"cpu\"]"}));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("OK: 24 items") != std::string::npos);
}

TEST_CASE("verify passes the two-path toy") {
  if (!plugin_built("toy_dual")) return;
  const auto o = run("verify", toy_args({}, "configs/toy_dual.toml"));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("OK: 24 items") != std::string::npos);
  CHECK(o.out.find("statistics: consistent") != std::string::npos);
}

TEST_CASE("verify checks mixed batches: the two-path toy whose local path outgrows its budgets") {
  if (!plugin_built("toy_dual")) return;
  const auto o = run("verify", toy_args({"--set", "budgets.token_budgets=[16, 32, 64]", "--set",
                                         "budgets.max_items_per_batch=8"},
                                        "configs/toy_dual.toml"));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("OK: 24 items") != std::string::npos);
  CHECK(o.out.find(" mixed\n") != std::string::npos);
  CHECK(o.out.find(", 0 mixed\n") == std::string::npos);  // some batches were mixed
  CHECK(o.out.find("statistics: consistent") != std::string::npos);
}

TEST_CASE("verify catches a plugin that zero-pads cu_seqlens and names the buffer") {
  if (!plugin_built("toy_badpad")) {
    MESSAGE("toy_badpad is not built: skipped");
    return;
  }
  const auto o = run("verify", toy_args({"--set", "plugin.name=\"toy_badpad\""}));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("\nMISMATCH: item 'synthetic/") != std::string::npos);
  CHECK(
      o.out.find("items differ; the failing request's 8 items (requests of 8) ran in batches: ") !=
      std::string::npos);
  CHECK(o.out.find("output 'rows' (f32), row ") != std::string::npos);
  CHECK(o.out.find("cu_seqlens (zero)") != std::string::npos);
  CHECK(o.out.find("buffer 'cu_seqlens' is declared zero padding; with repeat-last padding the "
                   "batch matches: the plugin's padding logic is probably wrong") !=
        std::string::npos);
  CHECK(o.out.find("buffer 'x' is declared") == std::string::npos);
}

namespace {

host_test::Outcome run_mistake(const std::string& mistake) {
  return run("verify",
             {"--config", std::string(EG_HOST_SOURCE_DIR) + "/tests/host/verify_mistakes.toml",
              "--set", "runtime.plugin_dirs=" + host_test::plugin_dirs_with_tests(), "--set",
              "plugin.config.mistake=\"" + mistake + "\""});
}

}  // namespace

TEST_CASE("verify passes the mistakes plugin when it makes none") {
  const auto o = run_mistake("none");
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("OK: 24 items, 2 outputs (rows, pooled)") != std::string::npos);
  CHECK(o.out.find("UNWRITTEN") == std::string::npos);
}

TEST_CASE("verify names zero-padded cu_seqlens: the reference runs each item unpadded") {
  // With the graphs' batch shape, an item alone is padded the same wrong way
  // and would agree with the graph; the reference's shape needs no padding.
  const auto o = run_mistake("zero_cu_seqlens");
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("\nMISMATCH: item 'synthetic/") != std::string::npos);
  CHECK(o.out.find("buffer 'cu_seqlens' is declared zero padding; with repeat-last padding the "
                   "batch matches") != std::string::npos);
  CHECK(o.out.find("buffer 'values' is declared") == std::string::npos);
  CHECK(o.out.find("capture-axis keys") == std::string::npos);
}

TEST_CASE("verify names axis keys that do not cover every item of the batch") {
  const auto o = run_mistake("axis_key_first_item");
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("\nMISMATCH: item 'synthetic/") != std::string::npos);
  CHECK(o.out.find("diagnosis: the batch ran under capture-axis keys [8], but the item alone "
                   "selects [32]") != std::string::npos);
  CHECK(o.out.find("select_axis_keys must return keys that serve every item") != std::string::npos);
  CHECK(o.out.find("with repeat-last padding the batch matches") == std::string::npos);
  // The padding trials then confirm the diagnosis instead of pointing elsewhere.
  CHECK(o.out.find("as expected for the diagnosis above") != std::string::npos);
  CHECK(o.out.find("look for rows the forward reads past") == std::string::npos);
}

TEST_CASE("verify names rows declared but never written (an output's rows per item)") {
  const auto o = run_mistake("pooled_rows_plus_one");
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("AGREE (see UNWRITTEN below): 24 items") != std::string::npos);
  CHECK(o.out.find("UNWRITTEN: item 'synthetic/") != std::string::npos);
  CHECK(o.out.find("output 'pooled': 1 of its 2 rows (the first: row 1) were never written") !=
        std::string::npos);
  CHECK(o.out.find("24 of 24 items have such rows") != std::string::npos);
}

TEST_CASE("verify names rows shifted by a rows-per-item count off by one") {
  const auto o = run_mistake("rows_minus_one");
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("\nMISMATCH: item 'synthetic/") != std::string::npos);
  CHECK(o.out.find("output 'rows' (f32)") != std::string::npos);
  CHECK(o.out.find("diagnosis: the item's rows in its batch equal its reference's shifted by ") !=
        std::string::npos);
  CHECK(o.out.find(": the rows the plugin declares per item (item_spec output_tokens, or the "
                   "output's rows_per_item) differ from the rows its forward writes") !=
        std::string::npos);
  CHECK(o.out.find("look for rows the forward reads past") == std::string::npos);
}

TEST_CASE("spec texts: geometry and every field the runtime reads") {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.height = 448;
  d.width = 336;
  d.frames = 1;
  CHECK(geometry_text(d) == "image 448x336");
  d.modality = EG_MODALITY_VIDEO;
  d.frames = 4;
  CHECK(geometry_text(d) == "video 4 frames of 448x336");
  eg_item_spec a{};
  a.input_size = 1024;
  a.output_tokens = 256;
  a.frames = 1;
  a.path_tokens[0] = 256;
  a.path_tokens[1] = 3;
  CHECK(spec_text(a, 1) == "input_size 1024, output_tokens 256, frames 1, path_tokens [256]");
  CHECK(spec_text(a, 2) == "input_size 1024, output_tokens 256, frames 1, path_tokens [256, 3]");
  eg_item_spec b = a;
  CHECK(same_spec(a, b, 2));
  b.path_tokens[1] = 4;
  CHECK(same_spec(a, b, 1));  // paths past num_paths are not the runtime's
  CHECK_FALSE(same_spec(a, b, 2));
  b = a;
  b.input_size += 1;
  CHECK_FALSE(same_spec(a, b, 1));
}

TEST_CASE("verify reports the spec check: item_spec_for_desc, or a 1.1 plugin's synthetic item") {
  auto o = run("verify", toy_args({}));
  INFO(o.out);
  CHECK(o.code == 0);
  CHECK(o.out.find("  specs: item_spec_for_desc gave every item's spec before it was made\n") !=
        std::string::npos);
  if (!plugin_built("toy_v1_1")) return;
  o = run("verify", toy_args({"--set", "plugin.name=\"toy_v1_1\""}));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 0);
  CHECK(o.out.find("  specs: a synthetic item gave every item's spec before it was made\n") !=
        std::string::npos);
}

TEST_CASE("verify makes a concurrent plugin's items again on threads, and only such a plugin's") {
  auto o = run("verify", toy_args({"--set", "runtime.item_threads=3"}));
  INFO(o.out);
  CHECK(o.code == 0);
  const std::string line = "  items: made again on ";
  const size_t at = o.out.find(line);
  REQUIRE(at != std::string::npos);
  const int threads = std::stoi(o.out.substr(at + line.size()));
  CHECK(threads >= 2);
  CHECK(threads <= 3);
  CHECK(o.out.find(" threads, every output as made one at a time\n", at) != std::string::npos);
  o = run("verify", toy_args({"--set", "runtime.item_threads=1"}));
  CHECK(o.code == 0);
  CHECK(o.out.find(line) == std::string::npos);
  if (!plugin_built("toy_faults")) return;
  // A raw C table without EG_PLUGIN_CONCURRENT_ITEMS: its items are made one at a time.
  o = run("verify",
          toy_args({"--set", "plugin.name=\"toy_faults\"", "--set", "runtime.item_threads=3"}));
  INFO(o.out);
  CHECK(o.code == 0);
  CHECK(o.out.find(line) == std::string::npos);
}

TEST_CASE("verify catches an item_spec_for_desc that differs from item_spec, or fails") {
  if (!plugin_built("toy_faults")) return;
  auto o = run("verify", toy_args({"--set", "plugin.name=\"toy_faults\"", "--set",
                                   "plugin.config.spec_for_desc_skew=5"}));
  INFO(o.out);
  INFO(o.log);
  CHECK(o.code == 1);
  CHECK(o.out.find("\nSPEC MISMATCH: plugin 'toy_faults', item 'synthetic/") != std::string::npos);
  CHECK(o.out.find("): item_spec_for_desc gives input_size ") != std::string::npos);
  CHECK(o.out.find("; the item item_create made has input_size ") != std::string::npos);
  CHECK(o.out.find("  24 of 24 items differ; the spec from an item's description must equal") !=
        std::string::npos);
  CHECK(o.out.find("OK: 24 items") != std::string::npos);  // the rows themselves match
  o = run("verify", toy_args({"--set", "plugin.name=\"toy_faults\"", "--set",
                              "plugin.config.fail_spec_for_desc=true"}));
  INFO(o.out);
  CHECK(o.code == 1);
  CHECK(o.out.find("item_spec_for_desc failed where item_create succeeded: plugin 'toy_faults': "
                   "item_spec_for_desc failed (invalid argument): item_spec_for_desc asked to "
                   "fail") != std::string::npos);
}

TEST_CASE("verify's bad input exits 2 with the fix") {
  auto o = run("verify", toy_args({"--tolerance", "-1"}));
  CHECK(o.code == 2);
  CHECK(o.log.find("--tolerance -1: the tolerance must be a finite number >= 0") !=
        std::string::npos);
  o = run("verify", toy_args({"--set", "workload.count=0"}));
  CHECK(o.code == 2);
  CHECK(o.log.find("verify needs at least one item") != std::string::npos);
  o = run("verify", {"--set", "workload.count=3"});
  CHECK(o.code == 2);
  o = run("verify", toy_args({"--set", "plugin.name=\"no_such_plugin\""}));
  CHECK(o.code == 2);
  o = run("verify", {"--help"});
  CHECK(o.code == 0);
  CHECK(o.out.find("--tolerance") != std::string::npos);
}
