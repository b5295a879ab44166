// Data-parallel balance: largest first onto the least-loaded rank, on the work
// plugins report (encoder_kit/work_estimate.hpp: FLOPs with attention's
// quadratic term) rather than on patch counts.
#include <encgraph/error.hpp>
#include <encgraph/load_balance.hpp>

#include <encoder_kit/work_estimate.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

using namespace encgraph;
using V = std::vector<int64_t>;

TEST_CASE("the reference example") {
  const RankAssignment a = balance_by_input_size({1000, 100, 200, 50}, 2);
  CHECK(a.order == V{0, 2, 1, 3});
  CHECK(a.items_per_rank == V{1, 3});
  CHECK(a.load_per_rank == V{1000, 350});
  CHECK(a.rank_items(1) == V{2, 1, 3});
}

TEST_CASE("ties go to the lowest rank; more ranks than items leaves ranks empty") {
  const RankAssignment a = balance_by_input_size({5, 5, 5}, 4);
  CHECK(a.items_per_rank == V{1, 1, 1, 0});
  CHECK(a.order == V{0, 1, 2});
  CHECK(a.rank_items(3).empty());
  CHECK_THROWS_AS(balance_by_input_size({1}, 0), Error);
}

namespace {

// Qwen3-VL's vision block at the released size: full attention over the
// whole image in every one of its 27 blocks.
constexpr encoder_kit::BlockShape kBlock{1152, 1152, 1152, 4304, 1};
constexpr int64_t kDepth = 27;

// The blocks' FLOPs of an image of `patches` patches (the truth here).
int64_t flops(int64_t patches) {
  return encoder_kit::block_flops(kBlock, patches, patches * patches, kDepth).value();
}

// The work estimate a plugin reports: those FLOPs in patch-equivalents.
int64_t estimate(int64_t patches) {
  return encoder_kit::token_equivalents(
      encoder_kit::block_flops(kBlock, patches, patches * patches, kDepth),
      kDepth * kBlock.row_flops());
}

// Max rank FLOPs / mean rank FLOPs of an assignment.
double imbalance(const RankAssignment& a, const V& patches, int64_t ranks) {
  double total = 0, most = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    double rank = 0;
    for (int64_t i : a.rank_items(r)) rank += static_cast<double>(flops(patches[i]));
    total += rank;
    most = std::max(most, rank);
  }
  return most / (total / static_cast<double>(ranks));
}

}  // namespace

TEST_CASE("one large item and many small: the work estimate balances, patch counts do not") {
  // A 1344² image (84² patches) among 100 224² ones (14² patches), 2 ranks.
  V patches{84 * 84};
  patches.insert(patches.end(), 100, 14 * 14);
  V work;
  for (int64_t p : patches) work.push_back(estimate(p));
  // Attention makes the large image cost more than its 36 times the patches.
  CHECK(work[0] > 2 * 36 * work[1]);

  const double by_patches = imbalance(balance_by_input_size(patches, 2), patches, 2);
  const double by_work = imbalance(balance_by_input_size(work, 2), patches, 2);
  CAPTURE(by_patches);
  CAPTURE(by_work);
  // Equal patches leave the large image's rank with far more FLOPs; equal
  // estimates are within one small image (about 1% of a rank) of even.
  CHECK(by_patches > 1.15);
  CHECK(by_work < 1.02);
}

TEST_CASE("a rank's load saturates instead of overflowing") {
  const RankAssignment a = balance_by_input_size({INT64_MAX, INT64_MAX / 2, 7}, 1);
  CHECK(a.load_per_rank == V{INT64_MAX});
  CHECK(a.order == V{0, 1, 2});
}
