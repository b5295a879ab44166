// Splitting a request's first batch so that host staging overlaps the device.
//
// A request's first batch cannot start before its pixels are staged in pinned
// memory and uploaded (on an H200: 6 ms of a 112 ms request of 16 videos, 1 ms
// of a 10 ms request of 16 small images). Later batches stage while the batch
// before them replays (two alternating staging slots), so that cost is exposed
// once a request. Splitting the first batch into a small head and the rest
// exposes only the head's staging, at the price of two replays instead of one;
// the calibrated replay times of the graphs say whether that pays.
#pragma once

#include <encgraph/packer.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace encgraph {

struct PipelineSplitInputs {
  // Tokens of each item of the batch, in the batch's order (the head is a prefix).
  std::vector<int64_t> item_tokens;
  // Replay time of the graph a batch of `tokens` would replay (its smallest
  // fitting budget); nullopt when none would.
  std::function<std::optional<double>(int64_t tokens)> replay_ms;
  // Exposed host staging and upload time per token, measured on earlier requests.
  double staging_ms_per_token = 0.0;
  // A split must save at least this share of the unsplit batch's time: a
  // smaller gain is within the replays' run-to-run spread.
  double min_gain = 0.02;
};

// The head's item count when splitting pays, else 0. The head's staging and
// replay run first; the rest stages during the head's replay and replays
// after it: head staging + max(head replay, rest staging) + rest replay,
// against staging + replay of the whole batch.
int64_t pipeline_split_point(const PipelineSplitInputs& in);

// The head (the batch's first k items) and the rest of a one-path batch, each
// with its tokens, frames and budget as pack_items gives them (the smallest
// fitting one of `budgets`, sorted; nullopt when none fits; 0 when empty). item_tokens and
// item_frames are indexed by the items' original indices.
std::pair<PackedBatch, PackedBatch> split_packed_batch(const PackedBatch& batch, int64_t k,
                                                       const std::vector<int64_t>& item_tokens,
                                                       const std::vector<int64_t>& item_frames,
                                                       const std::vector<int64_t>& budgets);

}  // namespace encgraph
