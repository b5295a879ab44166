// capture_axis: an encgraph plugin with one capture axis, on the C++ SDK (CPU
// only, fp32), written from docs/writing-a-plugin.md and docs/sdk.md alone.
//
// The model: an image is cut into 8x8 patches (the remainder cropped), each
// patch (192 values, pixel / 255 - 0.5) is embedded to 16 values (W_e, b_e,
// plus a sinusoidal embedding of the patch's index), then one attention layer
// (2 heads of 8, over the item's own patches) adds its output: for each patch
//   h = W_e x + b_e + pos(t);  y = h + W_o attention(W_q h, W_k h, W_v h).
// The output "tokens" is y, one row per patch. Weights are drawn from the
// config's `seed` (see `weight`); tests/loader/check_capture_axis.py computes
// the same model in float64 with numpy.
//
// Why an axis: the attention runs on dense per-item blocks, the layout batched
// attention kernels want. A batch's pixels are [max_batch_size, K, 192], K
// patches per item, and the scratch is sized by K; so K is a graph shape. A
// batched kernel computes whole K x K score blocks (this CPU forward stops at
// each item's length), so one K for all would waste K^2 work on small images
// (K = 256 for a 16-patch image). Hence the capture axis "seq_len" with keys
// 16, 64 and 256: select_axis_keys gives each batch the smallest key that
// holds its longest item. An item longer than 256 patches (up to 1024) gets its own length as
// the key and runs eagerly ("no graph for axis keys").
//
// Build with -DCAPTURE_AXIS_FIRST_ITEM_ONLY for the deliberately broken
// variant: select_axis_keys looks at the batch's first item only, so a longer
// item later in the batch is cut to the first item's key. `encgraph verify`
// must reject it, naming the capture-axis keys.
#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sdk = encgraph::sdk;

namespace {

constexpr int64_t kPatch = 8;
constexpr int64_t kChannels = 3;
constexpr int64_t kPatchDim = kPatch * kPatch * kChannels;  // 192
constexpr int64_t kHidden = 16;
constexpr int64_t kHeads = 2;
constexpr int64_t kHeadDim = kHidden / kHeads;
constexpr int64_t kMaxPatches = 1024;  // the largest budget: an item must fit one batch
constexpr int64_t kMaxSide = 4096;     // so that (side / 8)^2 cannot overflow anything
enum Buffer : int32_t { kPixels = 0, kLengths = 1 };
// Which weight a value belongs to (part of the weights' definition, see weight()).
enum Tensor : uint64_t { kWe = 0, kBe = 1, kWq = 2, kWk = 3, kWv = 4, kWo = 5 };

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Weight k of tensor `t`: uniform in [-scale, scale), from the config's seed.
// The reference draws the same values from the same formula.
float weight(uint64_t seed, Tensor t, uint64_t k, double scale) {
  const uint64_t z = splitmix64(splitmix64(seed * 8 + t) + k);
  return static_cast<float>((static_cast<double>(z >> 40) / 8388608.0 - 1.0) * scale);
}

// A deterministic byte (synthetic items' pixels).
uint8_t draw(uint64_t seed, uint64_t k) {
  return static_cast<uint8_t>(splitmix64(seed ^ (k << 20)) >> 56);
}

class CaptureAxis {
 public:
  static constexpr sdk::Identity identity{"capture_axis", "1.0.0",
                                          "patch embedding + one attention layer on dense "
                                          "per-item blocks: the capture-axis example",
                                          EG_MODALITY_IMAGE, EG_DEVICE_CPU};

  struct Item {
    int64_t patches = 0;
    std::vector<float> pixels;  // patches x kPatchDim, each patch (y, x, channel)
  };

  explicit CaptureAxis(sdk::CreateArgs& args) {
    if (args.device() != EG_DEVICE_CPU)
      sdk::fail(EG_ERR_UNSUPPORTED, "capture_axis runs on the CPU only");
    if (args.weights() && *args.weights() != "random")
      sdk::invalid(
          "capture_axis draws its weights from [plugin.config] seed; leave "
          "plugin.weights unset or set it to \"random\"");
    const auto seed = static_cast<uint64_t>(args.config.get<int64_t>("seed", 0, {0, 1ll << 40}));
    draw_weights(seed);
    info_.path("default", "patches")
        .buffer("pixels", EG_DTYPE_F32)   // [max_batch_size, K, 192]: item b's block
        .buffer("lengths", EG_DTYPE_I32)  // [max_batch_size]: padding items have 0 patches
        .output("tokens", kHidden, EG_DTYPE_F32)
        .capture_axis("seq_len", {16, 64, 256});
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {16, kMaxPatches}; }

  Item item_create(const eg_item_desc& d) const {
    if (d.modality != EG_MODALITY_IMAGE || d.frames != 1)
      sdk::fail(EG_ERR_UNSUPPORTED, "capture_axis encodes single images only");
    if (d.height < kPatch || d.width < kPatch || d.height > kMaxSide || d.width > kMaxSide)
      sdk::invalid("capture_axis: image height and width must be in [8, 4096], got " +
                   std::to_string(d.height) + "x" + std::to_string(d.width));
    if (d.pixels && d.channels != kChannels)
      sdk::invalid("capture_axis: pixels must be RGB (3 channels), got " +
                   std::to_string(d.channels));
    const int64_t ph = d.height / kPatch, pw = d.width / kPatch;
    if (ph * pw > kMaxPatches)
      sdk::invalid("capture_axis: a " + std::to_string(d.height) + "x" + std::to_string(d.width) +
                   " image has " + std::to_string(ph * pw) + " patches of 8x8, over the " +
                   std::to_string(kMaxPatches) + " the model takes; downscale it (at most " +
                   "256x256 pixels, or any size of at most 1024 patches)");
    Item it{ph * pw, {}};
    it.pixels.reserve(static_cast<size_t>(it.patches * kPatchDim));
    for (int64_t t = 0; t < it.patches; ++t)
      for (int64_t y = 0; y < kPatch; ++y)
        for (int64_t x = 0; x < kPatch; ++x)
          for (int64_t c = 0; c < kChannels; ++c) {
            const int64_t k =
                (((t / pw) * kPatch + y) * d.width + (t % pw) * kPatch + x) * kChannels + c;
            const uint8_t byte = d.pixels ? d.pixels[k] : draw(d.seed, static_cast<uint64_t>(k));
            it.pixels.push_back(byte / 255.0f - 0.5f);
          }
    return it;
  }

  sdk::ItemSpec item_spec(const Item& it) const {
    return {it.patches, it.patches, 1, {it.patches}};
  }

  // The keys of a batch: the smallest declared key that holds its longest item
  // (it then holds every item), or that item's length when none does (eager).
  std::vector<int64_t> select_axis_keys(const sdk::Batch<Item>& items) const {
    int64_t longest = 0;
#ifdef CAPTURE_AXIS_FIRST_ITEM_ONLY
    if (items.size() > 0) longest = items[0].patches;  // the bug: the others are ignored
#else
    for (const Item& it : items) longest = std::max(longest, it.patches);
#endif
    for (const int64_t key : kKeys)
      if (key >= longest) return {key};
    return {longest};
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    if (buffer == kLengths) return {s.max_batch_size};
    return {s.max_batch_size, block(s), kPatchDim};
  }

  // h, q, k, v and the attention's output (K x 16 each), and one row of K scores.
  size_t workspace_size(const eg_graph_shape& s) const {
    return static_cast<size_t>((5 * kHidden + 1) * block(s)) * sizeof(float);
  }

  // Warm-up and capture: one item of K zero patches (the other lengths 0).
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.get<float>(kPixels).set_rows(0);
    buffers.get<int32_t>(kLengths).push(static_cast<int32_t>(std::min(block(s), s.token_budget)));
  }

  // Item b's patches at the top of block b; the runtime zero-pads the rest of
  // the blocks and gives the padding items length 0.
  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    sdk::Staging<float> pixels = buffers.get<float>(kPixels);
    sdk::Staging<int32_t> lengths = buffers.get<int32_t>(kLengths);
    const int64_t k = block(s);
    for (const Item& it : items) {
      float* dst = pixels.append(1);              // one block: k x kPatchDim values
      const int64_t n = std::min(it.patches, k);  // more only under a broken key choice
      std::copy_n(it.pixels.data(), n * kPatchDim, dst);
      std::fill(dst + n * kPatchDim, dst + k * kPatchDim, 0.0f);
      lengths.push(static_cast<int32_t>(it.patches));
    }
  }

  // Item after item, each item's rows packed in batch order from row 0; rows
  // past the items are zero. Reads the lengths from the buffer (graph-safe).
  void forward(const sdk::ForwardArgs& args) {
    const int64_t k = block(args.shape());
    const auto pixels = args.buffer<float>(kPixels);
    const auto lengths = args.buffer<int32_t>(kLengths);
    const auto out = args.output<float>(0);
    if (pixels.width() != k * kPatchDim || args.workspace_size() < workspace_size(args.shape()))
      sdk::fail(EG_ERR_INTERNAL, "capture_axis: forward got buffers of another shape");
    float* ws = static_cast<float*>(args.workspace());
    float *h = ws, *q = h + k * kHidden, *kk = q + k * kHidden, *v = kk + k * kHidden,
          *att = v + k * kHidden, *scores = att + k * kHidden;
    int64_t row = 0;
    for (int64_t b = 0; b < lengths.rows(); ++b) {
      const int64_t len = lengths.at(b);
      if (len < 0 || row + len > out.rows())
        sdk::invalid("capture_axis: item lengths past the budget's " + std::to_string(out.rows()) +
                     " rows");
      // An item longer than its block (a key that does not hold it) is cut to
      // the block: never a read past it. Its other rows are zero, which
      // `encgraph verify` reports against the item alone.
      const int64_t n = std::min(len, k);
      const float* x = pixels.row(b);
      for (int64_t t = 0; t < n; ++t) embed(x + t * kPatchDim, t, h + t * kHidden);
      project(h, n, wq_, q);
      project(h, n, wk_, kk);
      project(h, n, wv_, v);
      attention(q, kk, v, n, scores, att);
      for (int64_t t = 0; t < n; ++t) {
        float* y = out.row(row + t);
        for (int64_t j = 0; j < kHidden; ++j) {
          float sum = h[t * kHidden + j];
          for (int64_t i = 0; i < kHidden; ++i) sum += wo_[j * kHidden + i] * att[t * kHidden + i];
          y[j] = sum;
        }
      }
      for (int64_t t = n; t < len; ++t) std::fill_n(out.row(row + t), kHidden, 0.0f);
      row += len;
    }
    for (; row < out.rows(); ++row) std::fill_n(out.row(row), kHidden, 0.0f);
  }

 private:
  static constexpr int64_t kKeys[] = {16, 64, 256};

  static int64_t block(const eg_graph_shape& s) {
    if (s.num_axis_keys != 1 || s.axis_keys[0] < 1 || s.axis_keys[0] > kMaxPatches)
      sdk::fail(EG_ERR_INTERNAL, "capture_axis: a graph shape without a seq_len key in [1, 1024]");
    return s.axis_keys[0];
  }

  void draw_weights(uint64_t seed) {
    auto fill = [&](std::vector<float>& w, Tensor t, int64_t n, int64_t fan_in) {
      w.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        w[i] =
            weight(seed, t, static_cast<uint64_t>(i), 1.0 / std::sqrt(static_cast<double>(fan_in)));
    };
    fill(we_, kWe, kHidden * kPatchDim, kPatchDim);  // row-major [out][in]
    fill(be_, kBe, kHidden, 1);
    fill(wq_, kWq, kHidden * kHidden, kHidden);
    fill(wk_, kWk, kHidden * kHidden, kHidden);
    fill(wv_, kWv, kHidden * kHidden, kHidden);
    fill(wo_, kWo, kHidden * kHidden, kHidden);
  }

  // h = W_e x + b_e + pos(t): sin at even columns, cos at odd, 10000^(2i/16).
  void embed(const float* x, int64_t t, float* h) const {
    for (int64_t j = 0; j < kHidden; ++j) {
      float sum = be_[j];
      for (int64_t i = 0; i < kPatchDim; ++i) sum += we_[j * kPatchDim + i] * x[i];
      const double angle =
          static_cast<double>(t) / std::pow(10000.0, static_cast<double>(j - j % 2) / kHidden);
      h[j] = sum + static_cast<float>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }

  static void project(const float* h, int64_t n, const std::vector<float>& w, float* y) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < kHidden; ++j) {
        float sum = 0.0f;
        for (int64_t i = 0; i < kHidden; ++i) sum += w[j * kHidden + i] * h[t * kHidden + i];
        y[t * kHidden + j] = sum;
      }
  }

  // Softmax attention per head over the item's n patches (no mask needed: the
  // block's rows past n are never read).
  static void attention(const float* q, const float* k, const float* v, int64_t n, float* scores,
                        float* out) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    for (int64_t head = 0; head < kHeads; ++head)
      for (int64_t i = 0; i < n; ++i) {
        const float* qi = q + i * kHidden + head * kHeadDim;
        float top = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          const float* kj = k + j * kHidden + head * kHeadDim;
          float dot = 0.0f;
          for (int64_t d = 0; d < kHeadDim; ++d) dot += qi[d] * kj[d];
          scores[j] = dot * scale;
          top = std::max(top, scores[j]);
        }
        float total = 0.0f;
        for (int64_t j = 0; j < n; ++j) total += scores[j] = std::exp(scores[j] - top);
        float* oi = out + i * kHidden + head * kHeadDim;
        for (int64_t d = 0; d < kHeadDim; ++d) {
          float sum = 0.0f;
          for (int64_t j = 0; j < n; ++j) sum += scores[j] * v[j * kHidden + head * kHeadDim + d];
          oi[d] = sum / total;
        }
      }
  }

  std::vector<float> we_, be_, wq_, wk_, wv_, wo_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(CaptureAxis)
