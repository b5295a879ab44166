// The toy's host code: its options, items and staging, the CPU forward (with
// the padding check that makes a missing padding step fail loudly) and the
// CPU backend. toy_cuda_backend.cpp is the CUDA one.
#include "toy_model.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace toy {
namespace {

// Bounds that keep every product the plugin computes (budget x hidden, ...)
// far inside 64 bits.
constexpr int64_t kMaxBudget = int64_t{1} << 30;

// a * b, or an input error naming `what` (sizes computed from items and budgets).
int64_t checked_mul(const Options& o, int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    sdk::invalid(o.plugin + ": " + what + " overflows 64 bits (" + std::to_string(a) + " x " +
                 std::to_string(b) + ")");
  return r;
}

// Values (tokens x hidden) one item may hold: 1 GiB of f32.
constexpr int64_t kMaxItemValues = int64_t{1} << 28;

// A small deterministic hash to draw item values from a seed.
float draw(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + a * 0xBF58476D1CE4E5B9ull + b * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
}

// Whether a path's rows are per token (and so per frame): not toy_dual's global path.
bool path_has_frames(Form form, int32_t path) {
  return !(form == Form::Dual && path == 0);
}

// Video frames item `it` sends through `path`: every frame of a video whose
// rows go down the path; images count none (max_frames_per_batch bounds video frames).
int64_t path_frames(const Options& o, Form form, const Item& it, int32_t path) {
  if (!it.video || !path_has_frames(form, path) || path_tokens(o, form, it, path) == 0) return 0;
  return it.frames;
}

// One sequence of a batch as the staging writer sees it.
struct Sequence {
  const float* x;  // rows x hidden
  int64_t rows;
  int64_t frames;  // video frames on this path (0 for an image)
};

void write_staging(const Options& o, const eg_graph_shape& s, const std::vector<Sequence>& seqs,
                   bool write_bias, sdk::StagingSet& buffers) {
  sdk::Staging<float> x = buffers.get<float>(kX);
  sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
  sdk::Staging<int32_t> seq_id = buffers.get<int32_t>(kSeqId);
  sdk::Staging<int32_t> frame_first_row = buffers.get<int32_t>(kFrames);
  int64_t frames = 0;
  for (const Sequence& q : seqs) frames += q.frames;
  if (frames > s.max_frames_per_batch || frames > frame_first_row.rows() - 1)
    sdk::invalid("batch has " + std::to_string(frames) +
                 " video frames, more than max_frames_per_batch " +
                 std::to_string(s.max_frames_per_batch) + " (raise budgets.max_frames_per_batch)");
  int32_t n = 0;
  int64_t row = 0;
  x.set_rows(0);  // an empty batch still reports its rows: all padding
  seq_id.set_rows(0);
  cu.push(0);
  for (const Sequence& q : seqs) {
    if (row + q.rows > x.rows())
      sdk::invalid("batch needs more than the budget's " + std::to_string(x.rows()) + " rows");
    if (n + 1 > cu.rows() - 1) sdk::invalid("batch has more items than max_batch_size");
    x.append(q.x, q.rows);
    std::fill_n(seq_id.append(q.rows), q.rows, n);
    for (int64_t f = 0; f < q.frames; ++f)
      frame_first_row.push(static_cast<int32_t>(row + f * (q.rows / q.frames)));
    row += q.rows;
    ++n;
    cu.push(static_cast<int32_t>(row));
  }
  frame_first_row.push(static_cast<int32_t>(row));  // repeat-last pads with it
  sdk::Staging<int32_t> num_seqs = buffers.get<int32_t>(kNumSeqs);
  num_seqs.at(0) = n;
  num_seqs.set_rows(0);  // a scalar: copied whole
  if (write_bias)
    buffers.get<float>(kBias).push(o.bias);
  else
    buffers.leave(kBias);  // keeps the value set at capture
}

// dst[d] = the mean over `rows` rows (> 0) of src[r][d].
void cpu_mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden) {
  for (int64_t d = 0; d < hidden; ++d) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += src[r * hidden + d];
    dst[d] = sum / static_cast<float>(rows);
  }
}

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

// Per sequence s occupying rows [c_s, c_{s+1}):
//   rows[r][d] = bias + scale * sum_{c_s <= q <= r} x[q][d] + 0.001 * (r - c_s) + 0.01 * d,
// padded rows 0, pooled[s] the mean of sequence s's rows (0 past num_seqs).
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

class CpuBackend final : public Backend {
 public:
  bool on_cpu() const override { return true; }
  void forward(const Options& o, const ForwardCall& call, void*) const override {
    cpu_forward(o, call);
  }
  void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void*) const override {
    std::fill(dst + rows, dst + std::max(rows, capacity), -1);
  }
  void copy(void* dst, const void* src, size_t bytes, void*) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden, void*) const override {
    cpu_mean_rows(dst, src, rows, hidden);
  }
};

}  // namespace

Options parse_options(sdk::Config& c, const std::optional<std::string>& weights) {
  Options o;
  o.plugin = c.plugin();
  o.hidden = c.get<int64_t>("hidden", o.hidden, {1, 65536});
  o.patch = c.get<int64_t>("patch", o.patch, {1, int64_t{1} << 20});
  // Their order and positivity are the runtime's to check (the budget range).
  o.min_budget = c.get<int64_t>("min_budget", o.min_budget, {-kMaxBudget, kMaxBudget});
  o.max_budget = c.get<int64_t>("max_budget", o.max_budget, {-kMaxBudget, kMaxBudget});
  o.local_min_tokens = c.get<int64_t>("local_min_tokens", o.local_min_tokens, {0, kMaxBudget});
  o.local_min_budget = c.get<int64_t>("local_min_budget", o.local_min_budget, {0, kMaxBudget});
  o.max_frames_per_video =
      c.get<int64_t>("max_frames_per_video", o.max_frames_per_video, {0, 65536});
  o.extra_kernels = c.get<int64_t>("extra_kernels", o.extra_kernels, {0, int64_t{1} << 20});
  o.cpu_us_per_1k_tokens = c.get<int64_t>("cpu_us_per_1k_tokens", 0, {0, 1000000});
  o.cpu_eager_us_per_1k_tokens = c.get<int64_t>("cpu_eager_us_per_1k_tokens", 0, {0, 1000000});
  o.check_padding = c.get<bool>("check_padding", o.check_padding);
  o.pooled = c.get<bool>("pooled", o.pooled);
  o.bias = c.get<float>("bias", o.bias);
  o.axis_keys = c.get<std::vector<int64_t>>("capture_axis_keys", {}, {1, 65536});
  if (weights && *weights != "random" && *weights != "none")
    sdk::invalid("the toy plugin has no weights; got weights = '" + *weights +
                 "' (use \"random\" or leave it unset)");
  return o;
}

Item make_item(const Options& o, const eg_item_desc& d, bool values) {
  if (d.height <= 0 || d.width <= 0 || d.frames <= 0)
    sdk::invalid("item geometry must be positive, got " + std::to_string(d.height) + "x" +
                 std::to_string(d.width) + "x" + std::to_string(d.frames));
  if (d.modality == EG_MODALITY_IMAGE && d.frames != 1)
    sdk::invalid("an image item has exactly one frame");
  Item it;
  it.frames = d.frames;
  it.video = d.modality == EG_MODALITY_VIDEO;
  const int64_t per_frame = std::max<int64_t>(
      1, checked_mul(o, d.height / o.patch, d.width / o.patch, "the item's tokens"));
  it.tokens = checked_mul(o, per_frame, d.frames, "the item's tokens");
  const int64_t count = checked_mul(o, it.tokens, o.hidden, "the item's values");
  if (count > kMaxItemValues)
    sdk::invalid(o.plugin + ": item of " + std::to_string(d.height) + "x" +
                 std::to_string(d.width) + " x " + std::to_string(d.frames) + " frames has " +
                 std::to_string(it.tokens) + " tokens of " + std::to_string(o.hidden) +
                 " values, over the limit of " + std::to_string(kMaxItemValues) +
                 " values per item (raise patch)");
  if (!values) return it;
  const int64_t h = o.hidden;
  it.x.resize(static_cast<size_t>(count));
  const int64_t channels = std::max(d.channels, 1);
  const size_t npix =
      d.pixels ? static_cast<size_t>(checked_mul(
                     o, checked_mul(o, d.frames, d.height, "the item's pixels"),
                     checked_mul(o, d.width, channels, "the item's pixels"), "the item's pixels"))
               : 0;
  for (int64_t t = 0; t < it.tokens; ++t)
    for (int64_t c = 0; c < h; ++c)
      it.x[t * h + c] =
          npix ? d.pixels[static_cast<size_t>(t * h + c) % npix] / 255.0f : draw(d.seed, t, c);
  return it;
}

sdk::ItemSpec spec_of(const Options& o, Form form, const Item& it) {
  sdk::ItemSpec spec{it.tokens, 0, it.frames, {}};
  const int32_t paths = form == Form::Dual ? 2 : 1;
  for (int32_t p = 0; p < paths; ++p) {
    spec.path_tokens[p] = path_tokens(o, form, it, p);
    spec.output_tokens += spec.path_tokens[p];
  }
  return spec;
}

int64_t path_tokens(const Options& o, Form form, const Item& it, int32_t path) {
  if (form == Form::Single) return it.tokens;
  if (path == 0) return 1;  // global: one summary row per item
  return it.tokens >= o.local_min_tokens ? it.tokens : 0;
}

int64_t max_seqs(const eg_graph_shape& s) {
  return std::max<int64_t>(s.max_batch_size, 1);
}

// max_frames_per_batch, and no more than the budget's rows (every frame has at
// least one row), which keeps the buffer small when the bound is generous.
int64_t frame_capacity(Form form, const eg_graph_shape& s) {
  if (!path_has_frames(form, s.path)) return 0;
  return std::clamp<int64_t>(s.max_frames_per_batch, 0, std::max<int64_t>(s.token_budget, 0));
}

float axis_scale(const eg_graph_shape& s) {
  return s.num_axis_keys > 0 ? static_cast<float>(s.axis_keys[0]) : 1.0f;
}

void stage_batch(const Options& o, Form form, const eg_graph_shape& s,
                 const std::vector<const Item*>& items, sdk::StagingSet& buffers) {
  std::vector<Sequence> batch;
  for (const Item* it : items) {
    const int64_t t = path_tokens(o, form, *it, s.path);
    if (t > 0) batch.push_back({it->x.data(), t, path_frames(o, form, *it, s.path)});
  }
  write_staging(o, s, batch, false, buffers);
}

void stage_capture(const Options& o, const eg_graph_shape& s, sdk::StagingSet& buffers) {
  const int64_t hidden = o.hidden, budget = std::max<int64_t>(s.token_budget, 0);
  const int64_t seqs = std::min<int64_t>(max_seqs(s), std::max<int64_t>(budget, 1));
  std::vector<float> x(static_cast<size_t>(checked_mul(o, budget, hidden, "the capture input")));
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = draw(1234, k / static_cast<size_t>(hidden), k % static_cast<size_t>(hidden));
  std::vector<Sequence> batch;
  int64_t row = 0;
  for (int64_t k = 0; k < seqs; ++k) {
    const int64_t n = budget / seqs + (k == seqs - 1 ? budget % seqs : 0);
    batch.push_back({x.data() + row * hidden, n, 0});
    row += n;
  }
  write_staging(o, s, batch, true, buffers);
}

std::unique_ptr<Backend> make_backend(int32_t device, int32_t device_index) {
  if (device == EG_DEVICE_CUDA) return make_cuda_backend(device_index);
  return std::make_unique<CpuBackend>();
}

#ifndef TOY_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(int32_t) {
  sdk::fail(EG_ERR_UNSUPPORTED, "built without CUDA");
}
#endif

}  // namespace toy
