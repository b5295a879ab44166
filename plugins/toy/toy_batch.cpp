#include "toy_batch.hpp"

#include <encgraph/sdk/error.hpp>

#include <algorithm>
#include <string>

namespace toy {

namespace sdk = encgraph::sdk;

namespace {

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

}  // namespace

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

}  // namespace toy
