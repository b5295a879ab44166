// Token-budget planning: which budgets get a graph, the batch size limit, the
// frame limit, and each path's budget list. Pure functions, no device.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace encgraph {

// The largest token budget (and token step) a plan accepts: far above any
// model's batch (one graph of 2^30 tokens at hidden size 1 is already 4 GiB of
// f32 output), low enough that budget arithmetic can never overflow.
inline constexpr int64_t kMaxTokenBudget = int64_t{1} << 30;
// Default of BudgetRequest::max_graphs (the host's limits.max_graphs).
inline constexpr int64_t kDefaultMaxGraphs = 256;

// One path's own budgets ([budgets.paths.<name>]), replacing the global ones
// for that path only: a list, or (list empty) budgets generated with `token_step`
// from the path's minimum budget (else the global list's smallest) up to the
// largest global budget. Exactly one of the two is set.
struct PathBudgetRequest {
  std::vector<int64_t> token_budgets;  // explicit budgets, any order
  int64_t token_step = 0;              // > 0: generated, as BudgetRequest::token_step
};

// What the user asked for; empty / zero / nullopt means "infer".
struct BudgetRequest {
  std::vector<int64_t> token_budgets;           // explicit budgets, any order
  int64_t max_items_per_batch = 0;              // 0: infer
  std::optional<int64_t> max_frames_per_batch;  // nullopt: infer
  bool video_enabled = true;                    // false: max_frames_per_batch = 0
  // Generated budgets (not an explicit list): 0 doubles from the minimum to
  // the maximum; S > 0 doubles up to S, then steps by S (a finer grid where
  // batches are large and padding costs compute: graphs share one workspace,
  // so extra budgets cost capture time, not memory).
  int64_t token_step = 0;
  // Most graphs one plan may capture (every path's budgets times the capture
  // axes' key combinations); a plan over it is a Config error raised before
  // any budget list is built. <= 0: no limit. The host sets limits.max_graphs.
  int64_t max_graphs = kDefaultMaxGraphs;
  // Per path, by the plugin's path name (eg_path_info::name): that path's own
  // budgets; the other paths keep the global ones. A name the plugin does not
  // have is a Config error in plan_budgets, which knows the paths.
  std::map<std::string, PathBudgetRequest> paths;
};

struct PathBudgetSpec {
  std::string name;
  int64_t min_token_budget = 0;  // 0: the global budgets unchanged
  bool allow_zero_tokens = false;
};

struct BudgetPlan {
  std::vector<int64_t> token_budgets;  // ascending
  int64_t max_batch_size = 0;
  int64_t max_frames_per_batch = 0;
  std::vector<std::vector<int64_t>> path_budgets;  // per path, ascending, may start with 0
};

// Powers of two times `min_budget` up to `max_budget`, the maximum always
// included; with step > 0, doubling (after the minimum) stops below step and
// the list continues with the multiples of step above the last budget (e.g.
// 64..16384, step 1024: 64, 128, 256, 512, 1024, 2048, 3072, ..., 16384).
std::vector<int64_t> generate_budgets(int64_t min_budget, int64_t max_budget, int64_t step = 0);
// How many budgets generate_budgets would return, computed without building
// the list (same checks of its arguments).
int64_t generated_budget_count(int64_t min_budget, int64_t max_budget, int64_t step = 0);

// Checks everything about a request that needs no plugin: budgets positive and
// at most kMaxTokenBudget, token_step in [0, kMaxTokenBudget] and not with a
// list, max_items_per_batch in [0, kMaxTokenBudget] and at most the smallest
// listed budget (when both are set), max_frames_per_batch in [0,
// kMaxTokenBudget], each per-path request as the global one (a list or a step,
// named "budgets.paths.<name>.<key>"), and a listed plan within max_graphs.
// Throws encgraph::Error (Config) with the message plan_budgets gives, naming
// the key first ("budgets.<key> ..."); plan_budgets runs it first.
void check_budget_request(const BudgetRequest& request);

// Plans budgets from the request and the plugin's range [range_min, range_max]
// (only consulted when the request leaves budgets or batch size open). Each
// path's list: its request.paths entry, else the global list (generated from the
// path's min_token_budget when it declares one); 0 first when it allows zero
// tokens. A per-path list below the path's min_token_budget, or a request.paths
// name not among `paths`, is a Config error.
// `capture_combinations` is the number of capture-axis key combinations the
// plugin declares (1 without axes): each budget of each path is captured once
// per combination, and the total is held to request.max_graphs before any
// list is built. Throws encgraph::Error (Config) with a message naming the
// setting to change.
BudgetPlan plan_budgets(const BudgetRequest& request, int64_t range_min, int64_t range_max,
                        int64_t max_frames_per_video, const std::vector<PathBudgetSpec>& paths,
                        int64_t capture_combinations = 1);

// The graphs a plan captures: every path's nonzero budgets, times the
// capture-axis key combinations (saturating at INT64_MAX).
int64_t planned_graph_count(const BudgetPlan& plan, int64_t capture_combinations = 1);

// What makes that count, for a warning or an error, naming capture axes only
// when there are some: e.g. "130 budgets (budgets.token_step = 64, up to 8192)"
// or "2 budgets x 33 capture-axis key combinations".
std::string graph_count_factors(const BudgetPlan& plan, const BudgetRequest& request,
                                int64_t capture_combinations = 1);

// Smallest budget >= tokens in an ascending list, or nullopt when none fits.
std::optional<int64_t> smallest_fitting_budget(const std::vector<int64_t>& budgets, int64_t tokens);

}  // namespace encgraph
