// length_buckets: every sequence a batch can hold lands in exactly one launch
// whose bound covers it, merging never adds launches nor exceeds its bound
// (except a doubling group on its own), and the small budgets this is for
// collapse to one launch.
#include <encoder_kit/seq_buckets.hpp>
#include "kit_test_support.hpp"

#include <algorithm>
#include <random>

namespace {

using encoder_kit::bucket_units;
using encoder_kit::length_buckets;
using encoder_kit::SeqBucket;

// Sequence i of a batch of `rows` rows, longest first, has at most rows / (i + 1).
void check_covers(const std::vector<SeqBucket>& buckets, int64_t sequences, int64_t rows,
                  int64_t max_seqlen) {
  int64_t next = 0;
  for (const SeqBucket& b : buckets) {
    CHECK(b.first == next);
    CHECK(b.count > 0);
    for (int64_t i = b.first; i < b.first + b.count; ++i)
      CHECK(std::min(max_seqlen, rows / (i + 1)) <= b.max_seqlen);
    next += b.count;
  }
  CHECK(next <= sequences);
  // Sequences past the last launch cannot hold a row.
  if (next < sequences) CHECK(rows / (next + 1) == 0);
}

}  // namespace

TEST_CASE("length_buckets without merging: the doubling groups") {
  const auto b = length_buckets(16, 256, 256, 0);
  REQUIRE(b.size() == 5);
  const int64_t first[] = {0, 1, 3, 7, 15}, count[] = {1, 2, 4, 8, 1},
                bound[] = {256, 128, 64, 32, 16};
  for (size_t i = 0; i < b.size(); ++i) {
    CAPTURE(i);
    CHECK(b[i].first == first[i]);
    CHECK(b[i].count == count[i]);
    CHECK(b[i].max_seqlen == bound[i]);
  }
  check_covers(b, 16, 256, 256);
  // The longest sequence's own bound caps every group.
  CHECK(length_buckets(4, 1000, 100, 0).front().max_seqlen == 100);
  // No group for sequences no row can reach: 3 rows, 8 sequences.
  const auto few = length_buckets(8, 3, 3, 0);
  check_covers(few, 8, 3, 3);
  CHECK(few.back().first + few.back().count <= 3);
}

TEST_CASE("length_buckets merges small budgets into one launch") {
  // One 224² image's budget in Qwen2.5-VL (256 patch rows, up to 16 frames):
  // five groups, one launch.
  const auto b = length_buckets(16, 256, 256, encoder_kit::kBucketMergeUnits);
  REQUIRE(b.size() == 1);
  CHECK(b[0].first == 0);
  CHECK(b[0].count == 16);
  CHECK(b[0].max_seqlen == 256);
  CHECK(bucket_units(b[0]) == 64);
  check_covers(b, 16, 256, 256);
}

TEST_CASE("length_buckets merges up to the bound, inclusive") {
  // 16 slots of up to 256 rows: 64 units merged.
  CHECK(length_buckets(16, 256, 256, 64).size() == 1);
  CHECK(length_buckets(16, 256, 256, 63).size() > 1);
  // Qwen3-VL's one-image capacity: 64 slots, 256 units in one launch at the
  // plugins' bound, two at 128.
  CHECK(length_buckets(64, 256, 256, encoder_kit::kBucketMergeUnits).size() == 1);
  CHECK(length_buckets(64, 256, 256, 128).size() == 2);
}

TEST_CASE("the plugins' merge bound is the measured 256 units") {
  static_assert(encoder_kit::default_bucket_merge_units() == encoder_kit::kBucketMergeUnits);
  CHECK(encoder_kit::kBucketMergeUnits == 256);
}

TEST_CASE("length_buckets: merged launches stay within the bound, never more launches") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 70000);
    const int64_t sequences = 1 + static_cast<int64_t>(rng() % 600);
    const int64_t max_seqlen = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
    const int64_t merge = static_cast<int64_t>(rng() % 512);
    CAPTURE(rows);
    CAPTURE(sequences);
    CAPTURE(max_seqlen);
    CAPTURE(merge);
    const auto plain = length_buckets(sequences, rows, max_seqlen, 0);
    const auto merged = length_buckets(sequences, rows, max_seqlen, merge);
    check_covers(plain, sequences, rows, max_seqlen);
    check_covers(merged, sequences, rows, max_seqlen);
    CHECK(merged.size() <= plain.size());
    // The same sequences in all.
    CHECK(plain.back().first + plain.back().count == merged.back().first + merged.back().count);
    // A merged launch is over the bound only when it is one doubling group.
    int64_t plain_units = 0, merged_units = 0;
    for (const SeqBucket& b : plain) plain_units += bucket_units(b);
    for (const SeqBucket& b : merged) {
      merged_units += bucket_units(b);
      if (bucket_units(b) > merge) {
        const bool one_group = std::any_of(plain.begin(), plain.end(), [&](const SeqBucket& p) {
          return p.first == b.first && p.count == b.count;
        });
        CHECK(one_group);
      }
    }
    // What merging adds is bounded: at most `merge` units a launch.
    CHECK(merged_units <= plain_units + merge * static_cast<int64_t>(merged.size()));
  }
}

TEST_CASE("length_buckets leaves large budgets' groups apart") {
  // 16384 tokens of 4 patches, up to 256 frames of at most 9216 patches (1344²):
  // every group but the last is over the bound, and the last (one slot of 256
  // rows, 4 units) would make its neighbour 1032, so none merges.
  const auto plain = length_buckets(256, 65536, 9216, 0);
  const auto merged = length_buckets(256, 65536, 9216, encoder_kit::kBucketMergeUnits);
  CHECK(merged.size() == plain.size());
}
