// Data-parallel assignment of items to ranks by input size: largest first onto
// the least-loaded rank (ties: lowest rank), as the reference's load balancer.
// The sizes are each item's eg_item_spec::input_size: its work in whatever
// unit its plugin keeps; the shipped plugins report the forward's FLOPs in
// token-equivalents, attention's quadratic term included
// (plugins/encoder_kit/include/encoder_kit/work_estimate.hpp), so that ranks
// finish together when one item is much larger than the rest.
#pragma once

#include <cstdint>
#include <vector>

namespace encgraph {

struct RankAssignment {
  std::vector<int64_t> order;           // item indices, rank 0's first, then rank 1's…
  std::vector<int64_t> items_per_rank;  // count per rank
  std::vector<int64_t> load_per_rank;   // summed input size per rank (saturating)
  // Items of one rank, in assignment order.
  std::vector<int64_t> rank_items(int64_t rank) const;
};

RankAssignment balance_by_input_size(const std::vector<int64_t>& input_sizes, int64_t num_ranks);

}  // namespace encgraph
