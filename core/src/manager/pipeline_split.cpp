#include "pipeline_split.hpp"

#include <encgraph/budget_plan.hpp>

#include <algorithm>
#include <numeric>

namespace encgraph {

int64_t pipeline_split_point(const PipelineSplitInputs& in) {
  const int64_t n = static_cast<int64_t>(in.item_tokens.size());
  if (n < 2 || !(in.staging_ms_per_token > 0.0) || !in.replay_ms) return 0;
  const int64_t total = std::accumulate(in.item_tokens.begin(), in.item_tokens.end(), int64_t{0});
  const std::optional<double> whole = in.replay_ms(total);
  if (!whole) return 0;
  const double h = in.staging_ms_per_token;
  const double unsplit = h * static_cast<double>(total) + *whole;
  double best = unsplit * (1.0 - in.min_gain);
  int64_t best_k = 0;
  int64_t head = 0;
  for (int64_t k = 1; k < n; ++k) {
    head += in.item_tokens[static_cast<size_t>(k - 1)];
    const int64_t rest = total - head;
    const std::optional<double> r_head = in.replay_ms(head);
    const std::optional<double> r_rest = in.replay_ms(rest);
    if (!r_head || !r_rest) continue;
    const double cost =
        h * static_cast<double>(head) + std::max(*r_head, h * static_cast<double>(rest)) + *r_rest;
    if (cost < best) {
      best = cost;
      best_k = k;
    }
  }
  return best_k;
}

std::pair<PackedBatch, PackedBatch> split_packed_batch(const PackedBatch& batch, int64_t k,
                                                       const std::vector<int64_t>& item_tokens,
                                                       const std::vector<int64_t>& item_frames,
                                                       const std::vector<int64_t>& budgets) {
  PackedBatch head, rest;
  for (size_t j = 0; j < batch.items.size(); ++j) {
    PackedBatch& part = static_cast<int64_t>(j) < k ? head : rest;
    const auto idx = static_cast<size_t>(batch.items[j]);
    part.items.push_back(batch.items[j]);
    part.frames += item_frames.at(idx);
  }
  for (PackedBatch* part : {&head, &rest}) {
    int64_t tokens = 0;
    for (int64_t idx : part->items) tokens += item_tokens.at(static_cast<size_t>(idx));
    part->path_tokens = {tokens};
    // As the packer assigns them: 0 for an empty path.
    part->path_budget = {tokens == 0 ? std::optional<int64_t>(0)
                                     : smallest_fitting_budget(budgets, tokens)};
  }
  return {std::move(head), std::move(rest)};
}

}  // namespace encgraph
