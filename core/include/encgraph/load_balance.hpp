// Data-parallel assignment of items to ranks by input size: largest first onto
// the least-loaded rank (ties: lowest rank), as the reference's load balancer.
#pragma once

#include <cstdint>
#include <vector>

namespace encgraph {

struct RankAssignment {
  std::vector<int64_t> order;           // item indices, rank 0's first, then rank 1's…
  std::vector<int64_t> items_per_rank;  // count per rank
  std::vector<int64_t> load_per_rank;   // summed input size per rank
  // Items of one rank, in assignment order.
  std::vector<int64_t> rank_items(int64_t rank) const;
};

RankAssignment balance_by_input_size(const std::vector<int64_t>& input_sizes, int64_t num_ranks);

}  // namespace encgraph
