// Budget planning: the three sources, the power-of-two generator, the
// max_batch_size <= smallest budget invariant, per-path lists (the plugin's
// minimums and the user's budgets.paths), frame limits and the bound on the
// number of graphs (counted before any list is built).
#include <encgraph/budget_plan.hpp>
#include <encgraph/error.hpp>

#include <doctest/doctest.h>

#include <limits>

using namespace encgraph;
using V = std::vector<int64_t>;

namespace {
const std::vector<PathBudgetSpec> kOnePath = {{"default", 0, false}};

std::string config_error(const BudgetRequest& r, int64_t lo, int64_t hi,
                         const std::vector<PathBudgetSpec>& paths = kOnePath) {
  try {
    plan_budgets(r, lo, hi, 4, paths);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("generate_budgets doubles from the minimum and always includes the maximum") {
  CHECK(generate_budgets(64, 1024) == V{64, 128, 256, 512, 1024});
  CHECK(generate_budgets(100, 1000) == V{100, 200, 400, 800, 1000});
  CHECK(generate_budgets(7, 7) == V{7});
  CHECK_THROWS_AS(generate_budgets(0, 8), Error);
  CHECK_THROWS_AS(generate_budgets(16, 8), Error);
}

TEST_CASE("generate_budgets with a step doubles up to the step, then steps by it") {
  CHECK(generate_budgets(64, 4096, 1024) == V{64, 128, 256, 512, 1024, 2048, 3072, 4096});
  // The maximum is kept when it is no multiple of the step.
  CHECK(generate_budgets(64, 2500, 1024) == V{64, 128, 256, 512, 1024, 2048, 2500});
  // Doubling from a minimum that is no power of two stops below the step; the
  // grid then starts at the next multiple of step.
  CHECK(generate_budgets(100, 2000, 500) == V{100, 200, 400, 500, 1000, 1500, 2000});
  // A step at or below the minimum: a linear grid from the minimum's multiple.
  CHECK(generate_budgets(64, 320, 64) == V{64, 128, 192, 256, 320});
  CHECK(generate_budgets(64, 1024, 0) == generate_budgets(64, 1024));
  CHECK_THROWS_AS(generate_budgets(64, 1024, -1), Error);
}

TEST_CASE("token_step shapes budgets generated from the range, batch size and paths") {
  BudgetRequest r;
  r.token_step = 256;
  BudgetPlan p = plan_budgets(r, 64, 1024, 1, kOnePath);
  CHECK(p.token_budgets == V{64, 128, 256, 512, 768, 1024});
  r.max_items_per_batch = 100;
  p = plan_budgets(r, 64, 1024, 1, kOnePath);
  CHECK(p.token_budgets == V{100, 200, 256, 512, 768, 1024});
  r.max_items_per_batch = 0;
  p = plan_budgets(r, 64, 1024, 1, {{"global", 0, false}, {"local", 300, false}});
  CHECK(p.path_budgets[1] == V{300, 512, 768, 1024});  // the path's minimum, then the grid
  // An explicit list and a step contradict each other.
  r.token_budgets = {64, 128};
  const std::string msg = config_error(r, 64, 1024);
  CHECK(msg.find("budgets.token_step: shapes generated budgets") == 0);
  CHECK(msg.find("remove one of the two") != std::string::npos);
}

TEST_CASE("fully user-specified budgets and batch size are validated") {
  BudgetRequest r;
  r.token_budgets = {512, 128, 256};
  r.max_items_per_batch = 16;
  const BudgetPlan p = plan_budgets(r, 1, 2, 4, kOnePath);
  CHECK(p.token_budgets == V{128, 256, 512});
  CHECK(p.max_batch_size == 16);
  CHECK(p.max_frames_per_batch == 64);
  CHECK(p.path_budgets == std::vector<V>{{128, 256, 512}});

  r.max_items_per_batch = 200;
  const std::string msg = config_error(r, 1, 2);
  CHECK(msg.find("budgets.max_items_per_batch: 200 must be <=") == 0);
  CHECK(msg.find("smallest token budget (128)") != std::string::npos);
  CHECK(msg.find("Raise the smallest budget or lower max_items_per_batch") != std::string::npos);
}

TEST_CASE("only max items: budgets are generated from max(range min, max items)") {
  BudgetRequest r;
  r.max_items_per_batch = 100;
  const BudgetPlan p = plan_budgets(r, 64, 1000, 2, kOnePath);
  CHECK(p.token_budgets == V{100, 200, 400, 800, 1000});
  CHECK(p.max_batch_size == 100);
  CHECK(p.max_frames_per_batch == 200);
}

TEST_CASE("max items above the plugin's largest budget names budgets.max_items_per_batch") {
  BudgetRequest r;
  r.max_items_per_batch = 2000;
  const std::string msg = config_error(r, 64, 1000);
  CHECK(msg ==
        "budgets.max_items_per_batch: 2000 exceeds the plugin's largest budget (1000); "
        "lower it or set budgets.token_budgets");
}

TEST_CASE("only budgets: batch size is capped by range ratio and smallest budget") {
  BudgetRequest r;
  r.token_budgets = {32, 4096};
  BudgetPlan p = plan_budgets(r, 64, 8192, 1, kOnePath);
  CHECK(p.max_batch_size == 32);  // min(8192/64 = 128, 32)
  r.token_budgets = {1024, 4096};
  p = plan_budgets(r, 64, 8192, 1, kOnePath);
  CHECK(p.max_batch_size == 128);
}

TEST_CASE("neither: everything comes from the plugin's range") {
  const BudgetPlan p = plan_budgets({}, 256, 4096, 3, kOnePath);
  CHECK(p.token_budgets == V{256, 512, 1024, 2048, 4096});
  CHECK(p.max_batch_size == 16);
  CHECK(p.max_frames_per_batch == 48);
}

TEST_CASE("invalid plugin ranges are rejected with the reason") {
  CHECK(config_error({}, 0, 100).find("both ends must be positive") != std::string::npos);
  CHECK(config_error({}, 200, 100).find("minimum 200 > maximum 100") != std::string::npos);
}

TEST_CASE("max_frames_per_batch from its three sources") {
  BudgetRequest r;
  r.video_enabled = false;
  CHECK(plan_budgets(r, 64, 256, 8, kOnePath).max_frames_per_batch == 0);
  r.video_enabled = true;
  r.max_frames_per_batch = 5;
  CHECK(plan_budgets(r, 64, 256, 8, kOnePath).max_frames_per_batch == 5);
  r.max_frames_per_batch.reset();
  CHECK(plan_budgets(r, 64, 256, 8, kOnePath).max_frames_per_batch == 4 * 8);
}

TEST_CASE("per-path budgets: minimum per path and allow_zero_tokens") {
  const std::vector<PathBudgetSpec> paths = {{"global", 0, false}, {"local", 256, true}};
  const BudgetPlan p = plan_budgets({}, 64, 1024, 1, paths);
  REQUIRE(p.path_budgets.size() == 2);
  CHECK(p.path_budgets[0] == V{64, 128, 256, 512, 1024});
  CHECK(p.path_budgets[1] == V{0, 256, 512, 1024});

  const std::vector<PathBudgetSpec> bad = {{"local", 4096, false}};
  CHECK(config_error({}, 64, 1024, bad).find("path 'local'") != std::string::npos);
  CHECK(config_error({}, 64, 1024, {}).find("at least one") != std::string::npos);
}

TEST_CASE("smallest_fitting_budget") {
  const V b{0, 64, 128, 256};
  CHECK(*smallest_fitting_budget(b, 1) == 64);
  CHECK(*smallest_fitting_budget(b, 128) == 128);
  CHECK(*smallest_fitting_budget(b, 129) == 256);
  CHECK_FALSE(smallest_fitting_budget(b, 257).has_value());
}

TEST_CASE("generated_budget_count equals the generated list's size, without building it") {
  struct Row {
    int64_t lo, hi, step;
  };
  for (const Row& r : std::vector<Row>{{64, 1024, 0},
                                       {100, 1000, 0},
                                       {7, 7, 0},
                                       {64, 4096, 1024},
                                       {64, 2500, 1024},
                                       {100, 2000, 500},
                                       {64, 320, 64},
                                       {64, 8192, 1},
                                       {3, 100, 7}}) {
    CAPTURE(r.lo);
    CAPTURE(r.hi);
    CAPTURE(r.step);
    CHECK(generated_budget_count(r.lo, r.hi, r.step) ==
          static_cast<int64_t>(generate_budgets(r.lo, r.hi, r.step).size()));
  }
  // Doubling up to the largest int64 neither overflows nor loops.
  const int64_t top = std::numeric_limits<int64_t>::max();
  CHECK(generated_budget_count(1, top) == 64);
  const V all = generate_budgets(1, top);
  CHECK(all.size() == 64);
  CHECK(all[62] == int64_t{1} << 62);
  CHECK(all.back() == top);
  // A step of 1 over a huge range is counted, not built: the generator refuses it.
  CHECK(generated_budget_count(1, int64_t{1} << 40, 1) == int64_t{1} << 40);
  try {
    generate_budgets(1, int64_t{1} << 40, 1);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(std::string(e.what()).find("raise budgets.token_step") != std::string::npos);
  }
}

TEST_CASE("token_step = 1 over a wide range exceeds max_graphs with the count, keys and fix") {
  BudgetRequest r;
  r.token_step = 1;
  const std::string msg = config_error(r, 64, 8192);
  CHECK(msg.find("budgets.token_step: the plan would capture 8129 graphs, more than "
                 "limits.max_graphs (256)") == 0);
  CHECK(msg.find("budgets.token_step = 1 generates 8129 budgets from 64 to the largest budget, "
                 "8192") != std::string::npos);
  CHECK(msg.find("raise budgets.token_step (") != std::string::npos);
  CHECK(msg.find("budgets.token_budgets") != std::string::npos);
  CHECK(msg.find("raise limits.max_graphs") != std::string::npos);
  CHECK(msg.find("capture-axis") == std::string::npos);  // there are none
  // The step the message proposes fits.
  const size_t at = msg.find("raise budgets.token_step (") + 26;
  r.token_step = std::stoll(msg.substr(at));
  CHECK(planned_graph_count(plan_budgets(r, 64, 8192, 4, kOnePath)) <= 256);
  // Counted before anything is built: 2^30 budgets would need 8 GiB.
  r.token_step = 1;
  CHECK(config_error(r, 1, kMaxTokenBudget)
            .find("budgets.token_step: the plan would capture 1073741824 graphs") == 0);
}

TEST_CASE("max_graphs counts every path and capture-axis combination, and 0 lifts it") {
  BudgetRequest r;
  r.token_budgets = {8, 16};
  r.max_items_per_batch = 2;
  r.max_graphs = 64;
  CHECK(planned_graph_count(plan_budgets(r, 1, 2, 4, kOnePath, 32), 32) == 64);
  std::string msg;
  try {
    plan_budgets(r, 1, 2, 4, kOnePath, 33);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("budgets.token_budgets: the plan would capture 66 graphs, more than "
                 "limits.max_graphs (64)") == 0);
  CHECK(msg.find("budgets.token_budgets lists 2 budgets") != std::string::npos);
  CHECK(msg.find("times 33 capture-axis key combinations") != std::string::npos);
  CHECK(msg.find("prune the plugin's capture-axis keys") != std::string::npos);

  // Two paths: both lists count (the zero budget is not captured).
  BudgetRequest two;
  two.max_graphs = 8;
  const std::vector<PathBudgetSpec> paths = {{"global", 0, false}, {"local", 256, true}};
  CHECK(planned_graph_count(plan_budgets(two, 64, 1024, 1, paths)) == 8);
  two.max_graphs = 7;
  msg = config_error(two, 64, 1024, paths);
  CHECK(msg.find("limits.max_graphs: the plan would capture 8 graphs") == 0);
  CHECK(msg.find("the plugin's 2 paths take 5 + 3") != std::string::npos);

  BudgetRequest unlimited;
  unlimited.token_step = 1;
  unlimited.max_graphs = 0;
  CHECK(plan_budgets(unlimited, 64, 1024, 1, kOnePath).token_budgets.size() == 961);
}

TEST_CASE("budgets and steps above kMaxTokenBudget are refused, naming the key") {
  BudgetRequest r;
  r.token_budgets = {64, int64_t{1} << 62};
  CHECK(config_error(r, 1, 2).find("budgets.token_budgets[1]: must be <= 1073741824, the largest "
                                   "token budget encgraph plans, got 4611686018427387904") == 0);
  BudgetRequest step;
  step.token_step = int64_t{1} << 62;
  CHECK(config_error(step, 64, 1024).find("budgets.token_step: must be <= 1073741824") == 0);
  CHECK(config_error({}, 64, int64_t{1} << 62).find("the plugin's largest budget") == 0);
}

TEST_CASE("graph_count_factors names capture axes only when there are some") {
  BudgetRequest r;
  r.token_step = 1024;
  const BudgetPlan p = plan_budgets(r, 64, 4096, 1, kOnePath);
  CHECK(planned_graph_count(p) == 8);
  CHECK(graph_count_factors(p, r) == "8 budgets (budgets.token_step = 1024, up to 4096)");
  CHECK(graph_count_factors(p, r, 3) ==
        "8 budgets (budgets.token_step = 1024, up to 4096) x 3 capture-axis key combinations");
  CHECK(graph_count_factors(plan_budgets({}, 64, 256, 1, kOnePath), {}) ==
        "3 budgets (doubling up to 256)");
}

namespace {
std::string request_error(const BudgetRequest& r) {
  try {
    check_budget_request(r);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("check_budget_request checks what needs no plugin, with plan_budgets' messages") {
  auto both = [](const BudgetRequest& r, const std::string& expected) {
    const std::string alone = request_error(r);
    CAPTURE(alone);
    CHECK(alone.find(expected) != std::string::npos);
    // plan_budgets runs the same check first: the same message.
    CHECK(config_error(r, 16, 4096) == alone);
  };
  BudgetRequest r;
  CHECK(request_error(r).empty());
  r.token_budgets = {64, 256};
  r.max_items_per_batch = 8;
  CHECK(request_error(r).empty());
  SUBCASE("budgets") {
    r.token_budgets = {64, 0};
    both(r, "budgets.token_budgets[1]: budgets must be positive, got 0");
    r.token_budgets = {64, kMaxTokenBudget + 1};
    both(r, "budgets.token_budgets[1]: must be <= 1073741824, the largest token budget");
  }
  SUBCASE("steps") {
    r.token_step = 64;
    both(r, "budgets.token_step: shapes generated budgets, but budgets.token_budgets");
    r.token_budgets.clear();
    r.token_step = -1;
    both(r, "budgets.token_step: must be >= 0");
    r.token_step = kMaxTokenBudget + 1;
    both(r,
         "budgets.token_step: must be <= 1073741824, the largest token budget encgraph "
         "plans, got 1073741825");
  }
  SUBCASE("items") {
    r.max_items_per_batch = 65;
    both(r, "budgets.max_items_per_batch: 65 must be <= the smallest token budget (64)");
    r.max_items_per_batch = -1;
    both(r, "budgets.max_items_per_batch: must be >= 0");
    r.token_budgets.clear();
    r.max_items_per_batch = kMaxTokenBudget + 1;
    both(r,
         "budgets.max_items_per_batch: must be <= 1073741824, the largest token budget "
         "encgraph plans, got 1073741825");
  }
  SUBCASE("frames") {
    r.max_frames_per_batch = -2;
    both(r, "budgets.max_frames_per_batch: must be >= 0, got -2");
    r.max_frames_per_batch = kMaxTokenBudget + 1;
    both(r, "budgets.max_frames_per_batch: must be <= 1073741824");
  }
  SUBCASE("max_graphs: a list longer than the limit") {
    r.max_graphs = 1;
    both(r,
         "budgets.token_budgets: the plan would capture 2 graphs, more than "
         "limits.max_graphs (1)");
    r.max_graphs = 0;  // no limit
    CHECK(request_error(r).empty());
  }
}

TEST_CASE("check_budget_request leaves what needs the plugin to plan_budgets") {
  BudgetRequest r;
  r.max_items_per_batch = 5000;  // above this plugin's largest budget, but no plugin here
  CHECK(request_error(r).empty());
  CHECK(config_error(r, 16, 4096).find("exceeds the plugin's largest budget") != std::string::npos);
  r = BudgetRequest{};
  r.token_step = 1;  // graphs counted from the plugin's range only
  CHECK(request_error(r).empty());
  CHECK(config_error(r, 16, 4096).find("limits.max_graphs") != std::string::npos);
}

namespace {
// DeepSeek-OCR-2's shape: 256 tokens a global view, 144 a local crop (none for small images).
const std::vector<PathBudgetSpec> kDualPaths = {{"global", 0, false}, {"local", 0, true}};
}  // namespace

TEST_CASE("budgets.paths: a path's own list replaces the global budgets for that path only") {
  BudgetRequest r;
  r.token_budgets = {1024, 256, 512};
  r.max_items_per_batch = 4;
  r.paths["local"].token_budgets = {576, 144, 288, 144};
  const BudgetPlan p = plan_budgets(r, 1, 1, 1, kDualPaths);
  CHECK(p.token_budgets == V{256, 512, 1024});
  REQUIRE(p.path_budgets.size() == 2);
  CHECK(p.path_budgets[0] == V{256, 512, 1024});
  CHECK(p.path_budgets[1] == V{0, 144, 288, 576});  // sorted, unique, 0 first (allow_zero)
  CHECK(planned_graph_count(p) == 6);
  CHECK(graph_count_factors(p, r) ==
        "3 budgets (budgets.token_budgets), 6 graphs over 2 paths (own budgets: "
        "budgets.paths.local)");

  // One path of its own: the global list stays the plan's, the path takes its own.
  BudgetRequest one;
  one.token_budgets = {64};
  one.paths["default"].token_budgets = {100, 50};
  const BudgetPlan q = plan_budgets(one, 16, 1024, 1, kOnePath);
  CHECK(q.token_budgets == V{64});
  CHECK(q.path_budgets == std::vector<V>{{50, 100}});
  CHECK(planned_graph_count(q) == 2);
  CHECK(graph_count_factors(q, one) ==
        "1 budgets (budgets.token_budgets), 2 graphs over 1 path (own budgets: "
        "budgets.paths.default)");
}

TEST_CASE("budgets.paths: a path's own token_step generates from its minimum to the largest") {
  // The plugin's minimums: 256 a global view, 144 a crop; the local path steps by 144.
  const std::vector<PathBudgetSpec> ds = {{"global", 256, false}, {"local", 144, true}};
  BudgetRequest r;
  r.paths["local"].token_step = 144;
  const BudgetPlan p = plan_budgets(r, 256, 8192, 1, ds);
  CHECK(p.path_budgets[0] == V{256, 512, 1024, 2048, 4096, 8192});
  const V& local = p.path_budgets[1];
  REQUIRE(local.size() == 58);  // 0, 144 x 1..56, 8192
  CHECK(local[0] == 0);
  for (size_t i = 1; i + 1 < local.size(); ++i) CHECK(local[i] == 144 * static_cast<int64_t>(i));
  CHECK(local.back() == 8192);
  // 48 crops fill a budget exactly instead of padding to 8192.
  CHECK(*smallest_fitting_budget(local, 48 * 144) == 6912);

  // A path without a minimum starts at the global list's smallest budget.
  BudgetRequest listed;
  listed.token_budgets = {64, 1024};
  listed.paths["local"].token_step = 256;
  const BudgetPlan q = plan_budgets(listed, 16, 4096, 1, kDualPaths);
  CHECK(q.path_budgets[0] == V{64, 1024});
  CHECK(q.path_budgets[1] == V{0, 64, 128, 256, 512, 768, 1024});

  // A path whose minimum lies above the largest budget may list its own budgets.
  const std::vector<PathBudgetSpec> big = {{"global", 0, false}, {"local", 2048, false}};
  CHECK(config_error(listed, 16, 4096, big) ==
        "path 'local' declares minimum budget 2048 outside (0, 1024], the largest budget; raise "
        "the largest budget or list the path's budgets in budgets.paths.local.token_budgets");
  listed.paths["local"] = PathBudgetRequest{{2048, 4096}, 0};
  CHECK(plan_budgets(listed, 16, 4096, 1, big).path_budgets[1] == V{2048, 4096});
}

TEST_CASE("budgets.paths: a name the plugin lacks is an error naming the key and its paths") {
  BudgetRequest r;
  r.paths["lokal"].token_budgets = {144};
  CHECK(config_error(r, 64, 1024, kDualPaths) ==
        "budgets.paths.lokal: the plugin has no path 'lokal' (its paths: 'global', 'local'); "
        "name one of them, or remove [budgets.paths.lokal]");
  CHECK(config_error(r, 64, 1024) ==
        "budgets.paths.lokal: the plugin has no path 'lokal' (its paths: 'default'); name one "
        "of them, or remove [budgets.paths.lokal]");
  // Known only with the plugin: the request alone is fine.
  CHECK(request_error(r).empty());
}

TEST_CASE("budgets.paths: invalid lists get the global list's checks, naming the path's key") {
  auto both = [](const BudgetRequest& r, const std::string& expected) {
    const std::string alone = request_error(r);
    CAPTURE(alone);
    CHECK(alone.find(expected) == 0);
    CHECK(config_error(r, 16, 4096, kDualPaths) == alone);
  };
  BudgetRequest r;
  SUBCASE("empty") {
    r.paths["local"] = {};
    both(r,
         "budgets.paths.local: gives no budgets (token_budgets is empty and token_step is 0): "
         "list the path's budgets in budgets.paths.local.token_budgets, set "
         "budgets.paths.local.token_step, or remove [budgets.paths.local]");
  }
  SUBCASE("not positive") {
    r.paths["local"].token_budgets = {144, 0, -3};
    both(r, "budgets.paths.local.token_budgets[1]: budgets must be positive, got 0");
  }
  SUBCASE("above the largest budget encgraph plans") {
    r.paths["global"].token_budgets = {256, kMaxTokenBudget + 1};
    both(r,
         "budgets.paths.global.token_budgets[1]: must be <= 1073741824, the largest token budget "
         "encgraph plans, got 1073741825; list smaller budgets");
  }
  SUBCASE("steps") {
    r.paths["local"].token_step = -1;
    both(r, "budgets.paths.local.token_step: must be >= 0");
    r.paths["local"].token_step = kMaxTokenBudget + 1;
    both(r, "budgets.paths.local.token_step: must be <= 1073741824");
    r.paths["local"] = PathBudgetRequest{{144}, 144};
    both(r,
         "budgets.paths.local.token_step: shapes generated budgets, but "
         "budgets.paths.local.token_budgets lists them ([144]); remove one of the two");
  }
  SUBCASE("below the path's minimum (known with the plugin)") {
    const std::vector<PathBudgetSpec> ds = {{"global", 256, false}, {"local", 144, true}};
    r.paths["local"].token_budgets = {100, 288};
    CHECK(request_error(r).empty());
    CHECK(config_error(r, 256, 1024, ds) ==
          "budgets.paths.local.token_budgets: 100 is below the path's minimum budget, 144 (the "
          "plugin declares it: a smaller graph holds nothing); list budgets >= 144");
  }
}

TEST_CASE("budgets.paths: max_graphs counts the per-path lists, not an unused global list") {
  BudgetRequest r;
  r.token_budgets = {64, 128};
  r.max_items_per_batch = 1;
  r.paths["local"].token_budgets = {8, 16, 24, 32, 40, 48, 56, 64, 72, 80};
  r.max_graphs = 12;
  CHECK(planned_graph_count(plan_budgets(r, 1, 2, 1, kDualPaths)) == 12);
  r.max_graphs = 11;
  std::string msg = config_error(r, 1, 2, kDualPaths);
  CHECK(msg.find("budgets.paths.local.token_budgets: the plan would capture 12 graphs, more than "
                 "limits.max_graphs (11): "
                 "budgets.token_budgets lists 2 budgets; budgets.paths.local.token_budgets "
                 "lists 10 budgets; the plugin's 2 paths take 2 + 10. Fix: list fewer budgets "
                 "in budgets.paths.local.token_budgets, list fewer budgets in "
                 "budgets.token_budgets, or raise limits.max_graphs") == 0);
  // Lists longer than the limit fail without the plugin too.
  r.max_graphs = 9;
  msg = request_error(r);
  CHECK(msg.find("budgets.paths.local.token_budgets: the plan would capture at least 10 graphs, "
                 "more than limits.max_graphs (9): "
                 "budgets.paths.local.token_budgets lists 10 budgets") == 0);
  CHECK(config_error(r, 1, 2, kDualPaths) == msg);

  // Every path its own list: the global list (longer than the limit) serves none.
  BudgetRequest own;
  for (int64_t b = 1; b <= 10; ++b) own.token_budgets.push_back(64 * b);
  own.paths["global"].token_budgets = {256, 512};
  own.paths["local"].token_budgets = {144, 288};
  own.max_graphs = 4;
  CHECK(request_error(own).empty());
  CHECK(planned_graph_count(plan_budgets(own, 64, 1024, 1, kDualPaths)) == 4);
  own.max_graphs = 3;
  CHECK(request_error(own).find(
            "budgets.paths.global.token_budgets: the plan would capture at least 4 graphs") == 0);

  // A per-path step is counted before its list is built.
  BudgetRequest step;
  step.paths["local"].token_step = 1;
  msg = config_error(step, 64, 8192, kDualPaths);
  CHECK(msg.find("budgets.paths.local.token_step: the plan would capture 8137 graphs, more than "
                 "limits.max_graphs (256): "
                 "doubling from 64 to the largest budget, 8192, gives 8 budgets; "
                 "budgets.paths.local.token_step = 1 generates 8129 budgets; the plugin's 2 "
                 "paths take 8 + 8129") == 0);
  CHECK(msg.find("raise budgets.paths.local.token_step, ") != std::string::npos);
  // No global step fits: the per-path list alone is over the limit.
  CHECK(msg.find("raise budgets.token_step (") == std::string::npos);
  // Times the capture axes' combinations.
  BudgetRequest axes;
  axes.token_budgets = {64};
  axes.paths["local"].token_budgets = {8, 16};
  axes.max_graphs = 8;
  CHECK(planned_graph_count(plan_budgets(axes, 1, 64, 1, kDualPaths, 2), 2) == 6);
  try {
    plan_budgets(axes, 1, 64, 1, kDualPaths, 3);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(
              "budgets.paths.local.token_budgets: the plan would capture 9 graphs") == 0);
    CHECK(std::string(e.what()).find("times 3 capture-axis key combinations") != std::string::npos);
  }
}

TEST_CASE("a budget error keeps its key, list element and detail apart for a front end") {
  BudgetRequest r;
  r.token_budgets = {64, 128, -5, 0};
  try {
    check_budget_request(r);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(e.key() == "budgets.token_budgets");
    CHECK(e.index() == 2);  // the first bad element as written, not as sorted
    CHECK(e.detail() == "budgets must be positive, got -5");
    CHECK(std::string(e.what()) == "budgets.token_budgets[2]: budgets must be positive, got -5");
  }
  BudgetRequest path;
  path.paths["local"] = {};
  try {
    check_budget_request(path);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.key() == "budgets.paths.local");
    CHECK(e.index() == -1);
    CHECK(e.detail().find("gives no budgets") == 0);
  }
}
