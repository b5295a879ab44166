#include <encgraph/budget_plan.hpp>
#include <encgraph/error.hpp>

#include <algorithm>
#include <sstream>

namespace encgraph {
namespace {

std::string list_string(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

}  // namespace

std::vector<int64_t> generate_budgets(int64_t min_budget, int64_t max_budget, int64_t step) {
  if (step < 0)
    throw_config("budgets.token_step must be >= 0 (0: powers of two), got " + std::to_string(step));
  if (min_budget <= 0 || max_budget <= 0)
    throw_config("invalid token budget range [" + std::to_string(min_budget) + ", " +
                 std::to_string(max_budget) + "]: both ends must be positive");
  if (min_budget > max_budget)
    throw_config("invalid token budget range: minimum " + std::to_string(min_budget) +
                 " > maximum " + std::to_string(max_budget));
  std::vector<int64_t> budgets{min_budget};
  for (int64_t b = min_budget * 2; b <= max_budget && (step == 0 || b < step); b *= 2)
    budgets.push_back(b);
  if (step > 0)  // then the multiples of step above the last doubled budget
    for (int64_t b = (budgets.back() / step + 1) * step; b <= max_budget; b += step)
      budgets.push_back(b);
  if (budgets.back() < max_budget) budgets.push_back(max_budget);
  return budgets;
}

BudgetPlan plan_budgets(const BudgetRequest& request, int64_t range_min, int64_t range_max,
                        int64_t max_frames_per_video, const std::vector<PathBudgetSpec>& paths) {
  BudgetPlan plan;
  if (request.max_items_per_batch < 0)
    throw_config("budgets.max_items_per_batch must be >= 0 (0 infers it), got " +
                 std::to_string(request.max_items_per_batch));
  std::vector<int64_t> user = request.token_budgets;
  std::sort(user.begin(), user.end());
  user.erase(std::unique(user.begin(), user.end()), user.end());
  if (!user.empty() && user.front() <= 0)
    throw_config("budgets.token_budgets must all be positive, got " + list_string(user));
  if (!user.empty() && request.token_step != 0)
    throw_config("budgets.token_step (" + std::to_string(request.token_step) +
                 ") shapes generated budgets, but budgets.token_budgets lists them (" +
                 list_string(user) + "); remove one of the two");

  if (!user.empty() && request.max_items_per_batch > 0) {
    plan.token_budgets = user;
    plan.max_batch_size = request.max_items_per_batch;
    const int64_t smallest = user.front();
    if (plan.max_batch_size > smallest)
      throw_config("budgets.max_items_per_batch (" + std::to_string(plan.max_batch_size) +
                   ") must be <= the smallest token budget (" + std::to_string(smallest) + ") of " +
                   list_string(user) + ": each item needs at least one token of " +
                   "every captured budget. Raise the smallest budget or lower "
                   "max_items_per_batch.");
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
        throw_config("budgets.max_items_per_batch (" + std::to_string(plan.max_batch_size) +
                     ") exceeds the plugin's largest budget (" + std::to_string(range_max) +
                     "); lower it or set budgets.token_budgets");
      plan.token_budgets = generate_budgets(std::max(range_min, request.max_items_per_batch),
                                            range_max, request.token_step);
    } else if (!user.empty()) {
      plan.token_budgets = user;
      plan.max_batch_size = std::min(range_max / range_min, user.front());
    } else {
      plan.token_budgets = generate_budgets(range_min, range_max, request.token_step);
      plan.max_batch_size = std::min(range_max / range_min, plan.token_budgets.front());
    }
  }
  plan.max_batch_size = std::max<int64_t>(plan.max_batch_size, 1);

  if (!request.video_enabled)
    plan.max_frames_per_batch = 0;
  else if (request.max_frames_per_batch)
    plan.max_frames_per_batch = *request.max_frames_per_batch;
  else
    plan.max_frames_per_batch = plan.max_batch_size * max_frames_per_video;
  if (plan.max_frames_per_batch < 0)
    throw_config("budgets.max_frames_per_batch must be >= 0, got " +
                 std::to_string(plan.max_frames_per_batch));

  if (paths.empty()) throw_config("the plugin declares no paths; it must declare at least one");
  const int64_t max_budget = plan.token_budgets.back();
  for (const auto& path : paths) {
    std::vector<int64_t> budgets;
    if (path.min_token_budget == 0) {
      budgets = plan.token_budgets;
    } else {
      if (path.min_token_budget < 0 || path.min_token_budget > max_budget)
        throw_config("path '" + path.name + "' declares minimum budget " +
                     std::to_string(path.min_token_budget) + " outside (0, " +
                     std::to_string(max_budget) +
                     "], the largest budget; raise the largest "
                     "budget");
      budgets = generate_budgets(path.min_token_budget, max_budget, request.token_step);
    }
    if (path.allow_zero_tokens) budgets.insert(budgets.begin(), 0);
    plan.path_budgets.push_back(std::move(budgets));
  }
  return plan;
}

std::optional<int64_t> smallest_fitting_budget(const std::vector<int64_t>& budgets,
                                               int64_t tokens) {
  for (int64_t b : budgets)
    if (b >= tokens) return b;
  return std::nullopt;
}

}  // namespace encgraph
