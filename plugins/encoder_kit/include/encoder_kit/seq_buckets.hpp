// Launches of variable-length attention over a table of sequences laid out
// longest first (frames of several images or videos in one batch).
//
// A rectangular grid, every sequence with the longest one's query blocks, would
// be mostly empty blocks at large budgets. Sequence i of a batch of `rows` rows
// holds at most rows / (i + 1) of them, so launching sequences
// [2^j - 1, 2^(j+1) - 1) with that bound keeps each launch's grid near `rows`.
// At small budgets those launches are mostly empty: one 224² image fills the
// first and leaves four more (Qwen2.5-VL's capacity) or six (Qwen3-VL's), each
// still a few microseconds in a replay. So adjacent launches are merged while
// the merged one stays within `merge_units` grid units (below): empty blocks
// exit at once, a launch does not.
#pragma once

#include <cstdint>
#include <vector>

namespace encoder_kit {

// One launch over sequences [first, first + count), none longer than max_seqlen rows.
struct SeqBucket {
  int64_t first = 0, count = 0, max_seqlen = 0;
};

// A launch's grid per head, in 64-row query blocks a sequence: count x
// ceil(max_seqlen / 64).
int64_t bucket_units(const SeqBucket& b);

// The merge bound the plugins use. Why 256: the largest launch it makes, at
// 16 heads, is 4096 blocks of 64 queries (2048 of the 128 the Hopper kernel
// runs), nearly all of them empty blocks that exit at once; one 224² image's
// budget then runs one launch in either Qwen plugin (Qwen3-VL's capacity
// gives it 64 frame slots, 256 units), where each launch saved is ~4 µs in a
// replay. 256 beat 128 in every case measured (bench/kernels/EXPERIMENTS.md,
// commit 010fa6c).
inline constexpr int64_t kBucketMergeUnits = 256;
// The same, as the plugins' layouts take it for a default argument.
inline constexpr int64_t default_bucket_merge_units() {
  return kBucketMergeUnits;
}

// The launches for up to `sequences` sequences of together at most `rows` rows,
// none over `max_seqlen`: the doubling groups above, then adjacent groups merged
// (first to last) while the merged launch has at most merge_units units. A
// group's max_seqlen is its first sequence's bound. Groups whose bound is 0
// (no row can reach them) are left out.
std::vector<SeqBucket> length_buckets(int64_t sequences, int64_t rows, int64_t max_seqlen,
                                      int64_t merge_units);

}  // namespace encoder_kit
