#include <encgraph/error.hpp>
#include <encgraph/load_balance.hpp>

#include <algorithm>
#include <numeric>

namespace encgraph {

RankAssignment balance_by_input_size(const std::vector<int64_t>& sizes, int64_t num_ranks) {
  if (num_ranks <= 0) throw_config("data parallel needs at least one rank");
  std::vector<int64_t> by_size(sizes.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int64_t a, int64_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<int64_t>> per_rank(num_ranks);
  RankAssignment out;
  out.load_per_rank.assign(num_ranks, 0);
  for (int64_t idx : by_size) {
    const auto least = std::min_element(out.load_per_rank.begin(), out.load_per_rank.end());
    const int64_t rank = least - out.load_per_rank.begin();
    per_rank[rank].push_back(idx);
    // A plugin may report a huge work (saturated estimates): a rank's load
    // saturates too rather than overflowing.
    if (__builtin_add_overflow(*least, sizes[idx], &*least)) *least = INT64_MAX;
  }
  for (const auto& items : per_rank) {
    out.items_per_rank.push_back(static_cast<int64_t>(items.size()));
    out.order.insert(out.order.end(), items.begin(), items.end());
  }
  return out;
}

std::vector<int64_t> RankAssignment::rank_items(int64_t rank) const {
  int64_t begin = 0;
  for (int64_t r = 0; r < rank; ++r) begin += items_per_rank[r];
  return {order.begin() + begin, order.begin() + begin + items_per_rank[rank]};
}

}  // namespace encgraph
