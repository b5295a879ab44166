// Launches of variable-length attention over a table of sequences laid out
// longest first (frames of several images or videos in one batch).
//
// A rectangular grid, every sequence with the longest one's query blocks, would
// be mostly empty blocks at large budgets. Sequence i of a batch of `rows` rows
// holds at most rows / (i + 1) of them, so launching sequences
// [2^j - 1, 2^(j+1) - 1) with that bound keeps each launch's grid near `rows`.
// At small budgets those launches are mostly empty: one 224² image fills the
// first and leaves four more that still cost a few microseconds each in a
// replay. So adjacent launches are merged while the merged one stays within
// `merge_units` grid units (below): empty blocks exit at once, a launch does
// not.
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

// The merge bound the plugins use: 128 units (2048 blocks of 64 queries at 16
// heads), or 0, no merging, when ENCGRAPH_ATTENTION_MERGE_BUCKETS is "0" (the
// benchmarks' A/B switch, read once a process).
int64_t default_bucket_merge_units();

// The launches for up to `sequences` sequences of together at most `rows` rows,
// none over `max_seqlen`: the doubling groups above, then adjacent groups merged
// (first to last) while the merged launch has at most merge_units units. A
// group's max_seqlen is its first sequence's bound. Groups whose bound is 0
// (no row can reach them) are left out.
std::vector<SeqBucket> length_buckets(int64_t sequences, int64_t rows, int64_t max_seqlen,
                                      int64_t merge_units);

}  // namespace encoder_kit
