#include "toy_cpu_forward.hpp"

#include "toy_batch.hpp"

#include <encgraph/sdk/error.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace toy {

namespace sdk = encgraph::sdk;

namespace {

// Fails when a padding logic was not applied: every padded row must be as the
// declared logic leaves it, or a test could pass with padding never done.
void check_padding(const Options& o, const ForwardCall& a, int64_t real_rows) {
  const int64_t budget = a.shape.token_budget, hidden = o.hidden;
  const float* x = static_cast<const float*>(a.buffers[kX].data);
  const int32_t* cu = static_cast<const int32_t*>(a.buffers[kCuSeqlens].data);
  const int32_t n = *static_cast<const int32_t*>(a.buffers[kNumSeqs].data);
  const int32_t* seq_id = static_cast<const int32_t*>(a.buffers[kSeqId].data);
  const int32_t* frames = static_cast<const int32_t*>(a.buffers[kFrames].data);
  const int64_t cap = a.buffers[kCuSeqlens].shape[0];
  const int64_t frame_cap = a.buffers[kFrames].shape[0];
  for (int64_t k = 1; k < cap; ++k)
    if (cu[k] < cu[k - 1])
      sdk::fail(EG_ERR_INTERNAL, "padding check: cu_seqlens decreases at " + std::to_string(k) +
                                     " (repeat-last padding missing)");
  for (int64_t r = real_rows; r < budget; ++r) {
    if (seq_id[r] != -1)
      sdk::fail(EG_ERR_INTERNAL, "padding check: seq_id row " + std::to_string(r) +
                                     " is not -1 (callback padding missing)");
    for (int64_t d = 0; d < hidden; ++d)
      if (x[r * hidden + d] != 0.0f)
        sdk::fail(EG_ERR_INTERNAL, "padding check: x row " + std::to_string(r) +
                                       " is not zero (zero padding missing)");
  }
  for (int32_t s = 0; s < n; ++s)
    for (int64_t r = cu[s]; r < cu[s + 1]; ++r)
      if (seq_id[r] != s)
        sdk::fail(EG_ERR_INTERNAL, "padding check: seq_id disagrees with cu_seqlens");
  for (int64_t f = 1; f < frame_cap; ++f)
    if (frames[f] < frames[f - 1])
      sdk::fail(EG_ERR_INTERNAL, "padding check: frame_first_row decreases at " +
                                     std::to_string(f) + " (repeat-last padding missing)");
  if (frames[frame_cap - 1] != real_rows)
    sdk::fail(EG_ERR_INTERNAL, "padding check: the last frame_first_row entry is " +
                                   std::to_string(frames[frame_cap - 1]) + ", not the batch's " +
                                   std::to_string(real_rows) +
                                   " rows (repeat-last padding missing)");
}

}  // namespace

void cpu_forward(const Options& o, const ForwardCall& a) {
  const int64_t budget = a.shape.token_budget, hidden = o.hidden;
  const float* x = static_cast<const float*>(a.buffers[kX].data);
  const int32_t* cu = static_cast<const int32_t*>(a.buffers[kCuSeqlens].data);
  const int32_t n = *static_cast<const int32_t*>(a.buffers[kNumSeqs].data);
  const float bias = *static_cast<const float*>(a.buffers[kBias].data);
  const int64_t cap = a.buffers[kCuSeqlens].shape[0];
  if (n < 0 || n + 1 > cap) sdk::invalid("num_seqs out of range");
  const int64_t real_rows = cu[n];
  if (real_rows < 0 || real_rows > budget) sdk::invalid("cu_seqlens[num_seqs] out of range");
  if (o.check_padding) check_padding(o, a, real_rows);
  const float scale = axis_scale(a.shape);
  float* out = a.out;
  std::vector<float> acc(static_cast<size_t>(hidden));
  for (int32_t s = 0; s < n; ++s) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t r = cu[s]; r < cu[s + 1]; ++r)
      for (int64_t d = 0; d < hidden; ++d) {
        acc[d] += x[r * hidden + d];
        out[r * hidden + d] = bias + scale * acc[d] + 0.001f * static_cast<float>(r - cu[s]) +
                              0.01f * static_cast<float>(d);
      }
  }
  std::fill(out + real_rows * hidden, out + budget * hidden, 0.0f);
  for (int64_t s = 0; a.pooled && s < a.pooled_slots; ++s) {
    const int64_t start = s < n ? cu[s] : 0, end = s < n ? cu[s + 1] : 0;
    if (end > start)
      cpu_mean_rows(a.pooled + s * hidden, out + start * hidden, end - start, hidden);
    else
      std::fill_n(a.pooled + s * hidden, hidden, 0.0f);
  }
  volatile float* ws = a.workspace;
  for (int64_t k = 0; k < o.extra_kernels && ws; ++k) ws[k] = ws[k] + 1.0f;
  // A forward whose cost grows with the budget, for the cost model's tests:
  // deterministic enough to compare warm-ups with replays on any machine.
  if (o.cpu_us_per_1k_tokens > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(o.cpu_us_per_1k_tokens * budget / 1024));
}

void cpu_mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden) {
  for (int64_t d = 0; d < hidden; ++d) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += src[r * hidden + d];
    dst[d] = sum / static_cast<float>(rows);
  }
}

}  // namespace toy
