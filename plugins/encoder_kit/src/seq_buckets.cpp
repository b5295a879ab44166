#include <encoder_kit/config.hpp>
#include <encoder_kit/seq_buckets.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace encoder_kit {

int64_t bucket_units(const SeqBucket& b) {
  return b.count * ((b.max_seqlen + 63) / 64);
}

int64_t bucket_merge_units_from(const char* value, bool* valid) {
  if (valid) *valid = true;
  if (value == nullptr || *value == '\0') return kBucketMergeUnits;
  int64_t v = -1;
  try {
    v = parse_int("ENCGRAPH_ATTENTION_MERGE_BUCKETS", value);
  } catch (const std::exception&) {  // not an integer: the default, and the caller warns
  }
  if (v < 0 || v > kMaxBucketMergeUnits) {
    if (valid) *valid = false;
    return kBucketMergeUnits;
  }
  return v;
}

int64_t default_bucket_merge_units() {
  static const int64_t units = [] {
    const char* value = std::getenv("ENCGRAPH_ATTENTION_MERGE_BUCKETS");
    bool valid = true;
    const int64_t u = bucket_merge_units_from(value, &valid);
    if (!valid)  // said once a process: a mistyped A/B switch must not pass unnoticed
      std::fprintf(stderr,
                   "encgraph: ENCGRAPH_ATTENTION_MERGE_BUCKETS=\"%s\" is not a count from 0 to "
                   "%lld; merging attention launches up to the default, %lld units\n",
                   value, static_cast<long long>(kMaxBucketMergeUnits),
                   static_cast<long long>(kBucketMergeUnits));
    return u;
  }();
  return units;
}

std::vector<SeqBucket> length_buckets(int64_t sequences, int64_t rows, int64_t max_seqlen,
                                      int64_t merge_units) {
  std::vector<SeqBucket> out;
  for (int64_t first = 0, width = 1; first < sequences; first += width, width *= 2) {
    SeqBucket b;
    b.first = first;
    b.count = std::min(width, sequences - first);
    b.max_seqlen = std::min(max_seqlen, rows / (first + 1));
    if (b.max_seqlen <= 0) break;  // no sequence this far down the order holds a row
    if (!out.empty()) {
      // The merged launch keeps the earlier group's bound, the larger.
      SeqBucket merged = out.back();
      merged.count += b.count;
      if (bucket_units(merged) <= merge_units) {
        out.back() = merged;
        continue;
      }
    }
    out.push_back(b);
  }
  return out;
}

}  // namespace encoder_kit
