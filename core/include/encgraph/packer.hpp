// Greedy packing of items into batches, as the reference manager does it: items
// sorted by output tokens (stable), appended while the batch holds fewer than
// max_batch_size items and every path stays within its largest budget; each path
// then takes its smallest fitting budget (0 for an empty path, nullopt when no
// budget fits: that path runs eagerly).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace encgraph {

struct PackedBatch {
  std::vector<int64_t> items;                       // original indices, packing order
  std::vector<int64_t> path_tokens;                 // real tokens per path
  std::vector<std::optional<int64_t>> path_budget;  // per path: budget, 0, or nullopt
};

// per_item_path_tokens[i][p]: tokens item i sends through path p.
// per_item_output_tokens[i]: the sort key.
std::vector<PackedBatch> pack_items(const std::vector<int64_t>& per_item_output_tokens,
                                    const std::vector<std::vector<int64_t>>& per_item_path_tokens,
                                    const std::vector<std::vector<int64_t>>& path_budgets,
                                    int64_t max_batch_size);

}  // namespace encgraph
