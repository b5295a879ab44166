// Greedy packing of items into batches, as the reference manager does it: items
// sorted by output tokens (stable), appended while the batch holds fewer than
// max_batch_size items, every path stays within its largest budget, and (when
// max_frames_per_batch > 0) the batch's frames stay within max_frames_per_batch;
// each path then takes its smallest fitting budget (0 for an empty path, nullopt
// when no budget fits: that path runs eagerly). An item with more frames than
// max_frames_per_batch gets a batch of its own (the manager runs it eagerly with
// its own frame count).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace encgraph {

struct PackedBatch {
  std::vector<int64_t> items;                       // original indices, packing order
  std::vector<int64_t> path_tokens;                 // real tokens per path, in its unit
  int64_t frames = 0;                               // the items' frames, summed
  std::vector<std::optional<int64_t>> path_budget;  // per path: budget, 0, or nullopt
};

// per_item_output_tokens[i]: the sort key.
// per_item_path_tokens[i][p]: what item i sends through path p (path p's unit).
// per_item_frames[i]: item i's frames (1 for an image).
// max_frames_per_batch: the most frames one batch holds; 0: not bounded.
std::vector<PackedBatch> pack_items(const std::vector<int64_t>& per_item_output_tokens,
                                    const std::vector<std::vector<int64_t>>& per_item_path_tokens,
                                    const std::vector<int64_t>& per_item_frames,
                                    const std::vector<std::vector<int64_t>>& path_budgets,
                                    int64_t max_batch_size, int64_t max_frames_per_batch);

}  // namespace encgraph
