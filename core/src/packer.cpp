#include <encgraph/budget_plan.hpp>
#include <encgraph/packer.hpp>

#include <algorithm>
#include <numeric>

namespace encgraph {

std::vector<PackedBatch> pack_items(const std::vector<int64_t>& out_tokens,
                                    const std::vector<std::vector<int64_t>>& path_tokens,
                                    const std::vector<int64_t>& frames,
                                    const std::vector<std::vector<int64_t>>& path_budgets,
                                    int64_t max_batch_size, int64_t max_frames_per_batch) {
  const size_t num_paths = path_budgets.size();
  std::vector<int64_t> max_budget(num_paths, 0);
  for (size_t p = 0; p < num_paths; ++p)
    max_budget[p] = path_budgets[p].empty() ? 0 : path_budgets[p].back();
  const bool bound_frames = max_frames_per_batch > 0;

  std::vector<int64_t> order(out_tokens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return out_tokens[a] < out_tokens[b]; });

  std::vector<PackedBatch> batches;
  PackedBatch current;
  current.path_tokens.assign(num_paths, 0);

  auto close_batch = [&] {
    if (current.items.empty()) return;
    current.path_budget.resize(num_paths);
    for (size_t p = 0; p < num_paths; ++p)
      current.path_budget[p] =
          current.path_tokens[p] == 0
              ? std::optional<int64_t>(0)
              : smallest_fitting_budget(path_budgets[p], current.path_tokens[p]);
    batches.push_back(std::move(current));
    current = PackedBatch{};
    current.path_tokens.assign(num_paths, 0);
  };
  auto append = [&](int64_t idx) {
    current.items.push_back(idx);
    for (size_t p = 0; p < num_paths; ++p) current.path_tokens[p] += path_tokens[idx][p];
    current.frames += frames[idx];
  };

  for (int64_t idx : order) {
    if (bound_frames && frames[idx] > max_frames_per_batch) {
      // Too many frames for any graph: alone, so only this item runs eagerly.
      close_batch();
      append(idx);
      close_batch();
      continue;
    }
    bool fits = static_cast<int64_t>(current.items.size()) < max_batch_size;
    for (size_t p = 0; fits && p < num_paths; ++p)
      fits = current.path_tokens[p] + path_tokens[idx][p] <= max_budget[p];
    if (fits && bound_frames) fits = current.frames + frames[idx] <= max_frames_per_batch;
    if (!current.items.empty() && !fits) close_batch();
    append(idx);
  }
  close_batch();
  return batches;
}

}  // namespace encgraph
