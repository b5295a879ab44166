#include <encgraph/budget_plan.hpp>
#include <encgraph/error.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

namespace encgraph {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// generate_budgets builds no longer list than this, whatever its caller checked.
constexpr int64_t kMaxGeneratedBudgets = int64_t{1} << 20;

int64_t saturating_add(int64_t a, int64_t b) {
  return a > kInt64Max - b ? kInt64Max : a + b;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return a * b;  // only small negatives reach here (they are errors)
  return a > kInt64Max / b ? kInt64Max : a * b;
}

std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string list_string(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

void check_generator_arguments(int64_t min_budget, int64_t max_budget, int64_t step) {
  if (step < 0)
    throw_config("budgets.token_step must be >= 0 (0: powers of two), got " + std::to_string(step));
  if (min_budget <= 0 || max_budget <= 0)
    throw_config("invalid token budget range [" + std::to_string(min_budget) + ", " +
                 std::to_string(max_budget) + "]: both ends must be positive");
  if (min_budget > max_budget)
    throw_config("invalid token budget range: minimum " + std::to_string(min_budget) +
                 " > maximum " + std::to_string(max_budget));
}

// Where the global budget list comes from: the user's list, or generated over
// [min, max] (max == 0: not generated).
struct GlobalBudgets {
  int64_t min = 0;
  int64_t max = 0;
  bool generated() const { return max > 0; }
};

// What every path's list is made from, resolved once for counting and building.
struct PathInputs {
  GlobalBudgets global;
  size_t listed = 0;       // the global list's size when it is listed
  int64_t smallest = 0;    // the smallest global budget
  int64_t max_budget = 0;  // the largest global budget
  // Per path: its own request (budgets.paths.<name>), or null for the global budgets.
  std::vector<const PathBudgetRequest*> own;
};

std::string path_key(const std::string& name) {
  return "budgets.paths." + name;
}

// Where a path with its own generated budgets starts: its minimum, else the
// global list's smallest.
int64_t own_generated_min(const PathBudgetSpec& path, const PathInputs& in) {
  return path.min_token_budget > 0 ? path.min_token_budget : in.smallest;
}

// Graphs of one path (its zero budget is not captured) for a global token step.
int64_t path_graph_count(const PathBudgetSpec& path, const PathBudgetRequest* own,
                         const PathInputs& in, int64_t step) {
  if (own && !own->token_budgets.empty())
    return static_cast<int64_t>(sorted_unique(own->token_budgets).size());
  if (own)
    return generated_budget_count(own_generated_min(path, in), in.max_budget, own->token_step);
  if (path.min_token_budget == 0)
    return in.global.generated() ? generated_budget_count(in.global.min, in.global.max, step)
                                 : static_cast<int64_t>(in.listed);
  return generated_budget_count(path.min_token_budget, in.max_budget, step);
}

std::vector<int64_t> path_graph_counts(const PathInputs& in, int64_t step,
                                       const std::vector<PathBudgetSpec>& paths) {
  std::vector<int64_t> counts;
  for (size_t p = 0; p < paths.size(); ++p)
    counts.push_back(path_graph_count(paths[p], in.own[p], in, step));
  return counts;
}

int64_t total_graphs(const std::vector<int64_t>& path_counts, int64_t capture_combinations) {
  int64_t sum = 0;
  for (int64_t c : path_counts) sum = saturating_add(sum, c);
  return saturating_mul(sum, std::max<int64_t>(capture_combinations, 1));
}

// The error for a plan over request.max_graphs: the count, what multiplied it
// (capture axes only when there are some) and each way out.
[[noreturn]] void throw_too_many_graphs(const BudgetRequest& request, const PathInputs& in,
                                        const std::vector<PathBudgetSpec>& paths,
                                        int64_t capture_combinations) {
  const GlobalBudgets& global = in.global;
  const std::vector<int64_t> counts = path_graph_counts(in, request.token_step, paths);
  const int64_t total = total_graphs(counts, capture_combinations);
  // The global budgets are described only when some path uses them.
  const bool uses_global = std::find(in.own.begin(), in.own.end(), nullptr) != in.own.end();
  std::vector<std::string> why_parts;
  if (uses_global && !global.generated())
    why_parts.push_back("budgets.token_budgets lists " + std::to_string(in.listed) + " budgets");
  else if (uses_global && request.token_step > 0)
    why_parts.push_back(
        "budgets.token_step = " + std::to_string(request.token_step) + " generates " +
        std::to_string(generated_budget_count(global.min, global.max, request.token_step)) +
        " budgets from " + std::to_string(global.min) + " to the largest budget, " +
        std::to_string(global.max));
  else if (uses_global)
    why_parts.push_back("doubling from " + std::to_string(global.min) + " to the largest budget, " +
                        std::to_string(global.max) + ", gives " +
                        std::to_string(generated_budget_count(global.min, global.max)) +
                        " budgets");
  std::string fix;
  for (size_t p = 0; p < paths.size(); ++p) {
    const PathBudgetRequest* own = in.own[p];
    if (!own) continue;
    const std::string key = path_key(paths[p].name);
    if (!own->token_budgets.empty()) {
      why_parts.push_back(key + ".token_budgets lists " + std::to_string(counts[p]) + " budgets");
      fix += "list fewer budgets in " + key + ".token_budgets, ";
    } else {
      why_parts.push_back(key + ".token_step = " + std::to_string(own->token_step) + " generates " +
                          std::to_string(counts[p]) + " budgets");
      fix += "raise " + key + ".token_step, ";
    }
  }
  std::string why;
  for (size_t i = 0; i < why_parts.size(); ++i) why += (i ? "; " : "") + why_parts[i];
  if (paths.size() > 1) {
    why += "; the plugin's " + std::to_string(paths.size()) + " paths take ";
    for (size_t p = 0; p < paths.size(); ++p) why += (p ? " + " : "") + std::to_string(counts[p]);
  }
  if (capture_combinations > 1)
    why += "; times " + std::to_string(capture_combinations) +
           " capture-axis key combinations (the plugin's capture axes)";
  if (uses_global && global.generated()) {
    // The smallest power-of-two step that fits, when one does.
    for (int64_t step = 64; step <= global.max; step *= 2) {
      if (step <= request.token_step) continue;
      if (total_graphs(path_graph_counts(in, step, paths), capture_combinations) <=
          request.max_graphs) {
        fix += "raise budgets.token_step (" + std::to_string(step) + " fits), ";
        break;
      }
    }
    fix += "list a few budgets in budgets.token_budgets, lower the largest budget (" +
           std::to_string(global.max) + ", the plugin's budget range, set in [plugin.config]), ";
  } else if (uses_global) {
    fix += "list fewer budgets in budgets.token_budgets, ";
  }
  if (capture_combinations > 1) fix += "prune the plugin's capture-axis keys, ";
  // The setting the message names first as a fix: a path's own budgets, else
  // the global list or step, else (budgets generated from the plugin's range)
  // the limit itself.
  std::string key = "limits.max_graphs";
  for (size_t p = 0; p < paths.size() && key == "limits.max_graphs"; ++p)
    if (in.own[p])
      key = path_key(paths[p].name) +
            (in.own[p]->token_budgets.empty() ? ".token_step" : ".token_budgets");
  if (key == "limits.max_graphs" && !global.generated())
    key = "budgets.token_budgets";
  else if (key == "limits.max_graphs" && request.token_step > 0)
    key = "budgets.token_step";
  throw_config_key(key, -1,
                   "the plan would capture " + std::to_string(total) +
                       " graphs, more than limits.max_graphs (" +
                       std::to_string(request.max_graphs) + "): " + why + ". Fix: " + fix +
                       "or raise limits.max_graphs (each graph costs capture time and memory)");
}

// One budget source, the global one ("budgets.") or a path's
// ("budgets.paths.<name>."): a step in [0, kMaxTokenBudget], listed budgets
// positive and at most kMaxTokenBudget (the first bad one named by its
// position as written), and not both.
void check_budget_source(const std::string& prefix, const std::vector<int64_t>& list,
                         int64_t step) {
  const std::string largest = std::to_string(kMaxTokenBudget);
  if (step < 0)
    throw_config_key(prefix + "token_step", -1,
                     "must be >= 0 (0: powers of two), got " + std::to_string(step));
  if (step > kMaxTokenBudget)
    throw_config_key(prefix + "token_step", -1,
                     "must be <= " + largest + ", the largest token budget encgraph plans, got " +
                         std::to_string(step) + "; use a smaller step");
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] <= 0)
      throw_config_key(prefix + "token_budgets", static_cast<int64_t>(i),
                       "budgets must be positive, got " + std::to_string(list[i]));
    if (list[i] > kMaxTokenBudget)
      throw_config_key(prefix + "token_budgets", static_cast<int64_t>(i),
                       "must be <= " + largest + ", the largest token budget encgraph plans, got " +
                           std::to_string(list[i]) + "; list smaller budgets");
  }
  if (!list.empty() && step != 0)
    throw_config_key(prefix + "token_step", -1,
                     "shapes generated budgets, but " + prefix + "token_budgets lists them (" +
                         list_string(sorted_unique(list)) + "); remove one of the two");
}

}  // namespace

int64_t generated_budget_count(int64_t min_budget, int64_t max_budget, int64_t step) {
  check_generator_arguments(min_budget, max_budget, step);
  int64_t count = 1, last = min_budget;
  // last <= max / 2 is last * 2 <= max without overflowing.
  while (last <= max_budget / 2 && (step == 0 || last * 2 < step)) last *= 2, ++count;
  if (step > 0) {  // the multiples k * step, k in [first, end]
    const int64_t first = last / step + 1, end = max_budget / step;
    if (end >= first) count = saturating_add(count, end - first + 1), last = end * step;
  }
  if (last < max_budget) ++count;
  return count;
}

std::vector<int64_t> generate_budgets(int64_t min_budget, int64_t max_budget, int64_t step) {
  const int64_t count = generated_budget_count(min_budget, max_budget, step);
  if (count > kMaxGeneratedBudgets)
    throw_config("budgets.token_step = " + std::to_string(step) + " would generate " +
                 std::to_string(count) + " budgets from " + std::to_string(min_budget) + " to " +
                 std::to_string(max_budget) + "; raise budgets.token_step");
  std::vector<int64_t> budgets;
  budgets.reserve(static_cast<size_t>(count));
  budgets.push_back(min_budget);
  for (int64_t b = min_budget; b <= max_budget / 2 && (step == 0 || b * 2 < step);) {
    b *= 2;
    budgets.push_back(b);
  }
  if (step > 0)  // then the multiples of step above the last doubled budget
    for (int64_t k = budgets.back() / step + 1, end = max_budget / step; k <= end; ++k)
      budgets.push_back(k * step);
  if (budgets.back() < max_budget) budgets.push_back(max_budget);
  return budgets;
}

void check_budget_request(const BudgetRequest& request) {
  const std::string largest = std::to_string(kMaxTokenBudget);
  const std::string items_key = "budgets.max_items_per_batch";
  if (request.max_items_per_batch < 0)
    throw_config_key(
        items_key, -1,
        "must be >= 0 (0 infers it), got " + std::to_string(request.max_items_per_batch));
  if (request.max_items_per_batch > kMaxTokenBudget)
    throw_config_key(items_key, -1,
                     "must be <= " + largest + ", the largest token budget encgraph plans, got " +
                         std::to_string(request.max_items_per_batch) +
                         "; each item needs a token of the budget, so lower it");
  check_budget_source("budgets.", request.token_budgets, request.token_step);
  const std::vector<int64_t> user = sorted_unique(request.token_budgets);
  if (!user.empty() && request.max_items_per_batch > user.front())
    throw_config_key(items_key, -1,
                     std::to_string(request.max_items_per_batch) +
                         " must be <= the smallest token budget (" + std::to_string(user.front()) +
                         ") of " + list_string(user) + ": each item needs at least one token of " +
                         "every captured budget. Raise the smallest budget or lower "
                         "max_items_per_batch.");
  const std::string frames_key = "budgets.max_frames_per_batch";
  if (request.max_frames_per_batch && *request.max_frames_per_batch < 0)
    throw_config_key(frames_key, -1,
                     "must be >= 0, got " + std::to_string(*request.max_frames_per_batch));
  if (request.max_frames_per_batch && *request.max_frames_per_batch > kMaxTokenBudget)
    throw_config_key(frames_key, -1,
                     "must be <= " + largest + ", far more frames than any batch holds, got " +
                         std::to_string(*request.max_frames_per_batch) + "; lower it");
  for (const auto& [name, own] : request.paths) {
    const std::string key = path_key(name);
    check_budget_source(key + ".", own.token_budgets, own.token_step);
    if (own.token_budgets.empty() && own.token_step == 0)
      throw_config_key(key, -1,
                       "gives no budgets (token_budgets is empty and token_step is 0): list the "
                       "path's budgets in " +
                           key + ".token_budgets, set " + key + ".token_step, or remove [" + key +
                           "] so that the path uses budgets.token_budgets");
  }
  if (request.max_graphs <= 0) return;
  // A listed plan captures at least one graph per budget (one path, no capture
  // axes); the plugin's paths and axes can only add to that. With per-path
  // lists the global list may serve no path: those lists are the bound then.
  if (request.paths.empty()) {
    if (static_cast<int64_t>(user.size()) > request.max_graphs) {
      PathInputs in;
      in.listed = user.size();
      in.smallest = user.front();
      in.max_budget = user.back();
      in.own = {nullptr};
      throw_too_many_graphs(request, in, {PathBudgetSpec{"default", 0, false}}, 1);
    }
    return;
  }
  int64_t listed = 0;
  std::string lists, first_listed;
  for (const auto& [name, own] : request.paths) {
    if (own.token_budgets.empty()) continue;
    if (first_listed.empty()) first_listed = name;
    const size_t n = sorted_unique(own.token_budgets).size();
    listed += static_cast<int64_t>(n);
    lists +=
        (lists.empty() ? "" : ", ") + path_key(name) + ".token_budgets lists " + std::to_string(n);
  }
  if (listed > request.max_graphs)
    throw_config_key(
        path_key(first_listed) + ".token_budgets", -1,
        "the plan would capture at least " + std::to_string(listed) +
            " graphs, more than limits.max_graphs (" + std::to_string(request.max_graphs) +
            "): " + lists +
            " budgets. Fix: list fewer budgets per path, or raise limits.max_graphs (each "
            "graph costs capture time and memory)");
}

BudgetPlan plan_budgets(const BudgetRequest& request, int64_t range_min, int64_t range_max,
                        int64_t max_frames_per_video, const std::vector<PathBudgetSpec>& paths,
                        int64_t capture_combinations) {
  check_budget_request(request);
  for (const auto& entry : request.paths) {
    const std::string& name = entry.first;
    if (std::any_of(paths.begin(), paths.end(),
                    [&](const PathBudgetSpec& path) { return path.name == name; }))
      continue;
    std::string names;
    for (const auto& path : paths) names += (names.empty() ? "'" : ", '") + path.name + "'";
    throw_config_key(path_key(name), -1,
                     "the plugin has no path '" + name +
                         "' (its paths: " + (names.empty() ? std::string("none") : names) +
                         "); name one of them, or remove [" + path_key(name) + "]");
  }
  BudgetPlan plan;
  const std::string largest = std::to_string(kMaxTokenBudget);
  const std::vector<int64_t> user = sorted_unique(request.token_budgets);

  GlobalBudgets global;
  if (!user.empty() && request.max_items_per_batch > 0) {
    plan.token_budgets = user;
    plan.max_batch_size = request.max_items_per_batch;  // checked against the smallest
  } else {
    if (range_min <= 0 || range_max <= 0)
      throw_config("the plugin's budget range [" + std::to_string(range_min) + ", " +
                   std::to_string(range_max) +
                   "] is invalid: both ends must be positive; set "
                   "budgets.token_budgets explicitly");
    if (range_min > range_max)
      throw_config("the plugin's budget range is invalid: minimum " + std::to_string(range_min) +
                   " > maximum " + std::to_string(range_max) +
                   "; set budgets.token_budgets explicitly");
    if (request.max_items_per_batch > 0) {
      plan.max_batch_size = request.max_items_per_batch;
      // Checked before generating: budgets from max_items_per_batch up to a
      // smaller maximum would fail with a message that does not name the key.
      if (plan.max_batch_size > range_max)
        throw_config_key("budgets.max_items_per_batch", -1,
                         std::to_string(plan.max_batch_size) +
                             " exceeds the plugin's largest budget (" + std::to_string(range_max) +
                             "); lower it or set budgets.token_budgets");
      global = {std::max(range_min, request.max_items_per_batch), range_max};
    } else if (!user.empty()) {
      plan.token_budgets = user;
      plan.max_batch_size = std::min(range_max / range_min, user.front());
    } else {
      global = {range_min, range_max};
      plan.max_batch_size = std::min(range_max / range_min, range_min);
    }
    if (global.generated() && global.max > kMaxTokenBudget)
      throw_config("the plugin's largest budget (" + std::to_string(global.max) +
                   ") exceeds the largest token budget encgraph plans, " + largest +
                   "; set budgets.token_budgets explicitly");
  }
  plan.max_batch_size = std::max<int64_t>(plan.max_batch_size, 1);

  if (!request.video_enabled)
    plan.max_frames_per_batch = 0;
  else if (request.max_frames_per_batch)
    plan.max_frames_per_batch = *request.max_frames_per_batch;
  else
    plan.max_frames_per_batch = saturating_mul(plan.max_batch_size, max_frames_per_video);

  if (paths.empty()) throw_config("the plugin declares no paths; it must declare at least one");
  PathInputs in;
  in.global = global;
  in.listed = user.size();
  in.smallest = global.generated() ? global.min : plan.token_budgets.front();
  in.max_budget = global.generated() ? global.max : plan.token_budgets.back();
  for (const auto& path : paths) {
    const auto own = request.paths.find(path.name);
    in.own.push_back(own == request.paths.end() ? nullptr : &own->second);
  }
  for (size_t p = 0; p < paths.size(); ++p) {
    const PathBudgetSpec& path = paths[p];
    const PathBudgetRequest* own = in.own[p];
    const std::string key = path_key(path.name);
    if (own && !own->token_budgets.empty()) {
      // A listed path needs no global budget of its own size, only budgets
      // that hold its minimum.
      const int64_t smallest = sorted_unique(own->token_budgets).front();
      if (path.min_token_budget < 0 || smallest < path.min_token_budget)
        throw_config_key(key + ".token_budgets", -1,
                         std::to_string(smallest) + " is below the path's minimum budget, " +
                             std::to_string(path.min_token_budget) +
                             " (the plugin declares it: a smaller graph holds nothing); list "
                             "budgets >= " +
                             std::to_string(path.min_token_budget));
      continue;
    }
    if (path.min_token_budget < 0 || path.min_token_budget > in.max_budget)
      throw_config(
          "path '" + path.name + "' declares minimum budget " +
          std::to_string(path.min_token_budget) + " outside (0, " + std::to_string(in.max_budget) +
          "], the largest budget; raise the largest " + "budget" +
          (own ? " or list the path's budgets in " + key + ".token_budgets" : std::string()));
  }
  // Counted before any list is built: a step of 1 over a wide range must fail
  // here, not after allocating and capturing thousands of graphs.
  if (request.max_graphs > 0 && total_graphs(path_graph_counts(in, request.token_step, paths),
                                             capture_combinations) > request.max_graphs)
    throw_too_many_graphs(request, in, paths, capture_combinations);

  if (global.generated())
    plan.token_budgets = generate_budgets(global.min, global.max, request.token_step);
  for (size_t p = 0; p < paths.size(); ++p) {
    const PathBudgetSpec& path = paths[p];
    const PathBudgetRequest* own = in.own[p];
    std::vector<int64_t> budgets;
    if (own && !own->token_budgets.empty())
      budgets = sorted_unique(own->token_budgets);
    else if (own)
      budgets = generate_budgets(own_generated_min(path, in), in.max_budget, own->token_step);
    else if (path.min_token_budget == 0)
      budgets = plan.token_budgets;
    else
      budgets = generate_budgets(path.min_token_budget, in.max_budget, request.token_step);
    if (path.allow_zero_tokens) budgets.insert(budgets.begin(), 0);
    plan.path_budgets.push_back(std::move(budgets));
  }
  return plan;
}

int64_t planned_graph_count(const BudgetPlan& plan, int64_t capture_combinations) {
  int64_t sum = 0;
  for (const auto& budgets : plan.path_budgets)
    sum += std::count_if(budgets.begin(), budgets.end(), [](int64_t b) { return b > 0; });
  return saturating_mul(sum, std::max<int64_t>(capture_combinations, 1));
}

std::string graph_count_factors(const BudgetPlan& plan, const BudgetRequest& request,
                                int64_t capture_combinations) {
  std::string out = std::to_string(plan.token_budgets.size()) + " budgets";
  const std::string largest =
      plan.token_budgets.empty() ? "0" : std::to_string(plan.token_budgets.back());
  if (!request.token_budgets.empty())
    out += " (budgets.token_budgets)";
  else if (request.token_step > 0)
    out +=
        " (budgets.token_step = " + std::to_string(request.token_step) + ", up to " + largest + ")";
  else
    out += " (doubling up to " + largest + ")";
  if (plan.path_budgets.size() > 1 || !request.paths.empty())
    out += ", " + std::to_string(planned_graph_count(plan)) + " graphs over " +
           std::to_string(plan.path_budgets.size()) +
           (plan.path_budgets.size() == 1 ? " path" : " paths");
  std::string own;
  for (const auto& entry : request.paths) own += (own.empty() ? "" : ", ") + path_key(entry.first);
  if (!own.empty()) out += " (own budgets: " + own + ")";
  if (capture_combinations > 1)
    out += " x " + std::to_string(capture_combinations) + " capture-axis key combinations";
  return out;
}

std::optional<int64_t> smallest_fitting_budget(const std::vector<int64_t>& budgets,
                                               int64_t tokens) {
  for (int64_t b : budgets)
    if (b >= tokens) return b;
  return std::nullopt;
}

}  // namespace encgraph
