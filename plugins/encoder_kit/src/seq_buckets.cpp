#include <encoder_kit/seq_buckets.hpp>

#include <algorithm>

namespace encoder_kit {

int64_t bucket_units(const SeqBucket& b) {
  return b.count * ((b.max_seqlen + 63) / 64);
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
