// two_path_newcomer: a two-path encgraph plugin on the C++ SDK (CPU only,
// fp32), written from docs/writing-a-plugin.md and docs/sdk.md alone.
//
// The model looks at an image twice, each look cut into 8x8 patches (192
// values, pixel / 255 - 0.5) and encoded as sequences of 16 patches:
//   path "global" (unit "view patches"): the image box-resized to 32x32, one
//       sequence of 16 patches per item;
//   path "local" (unit "tile patches"): the full-resolution image cut into
//       32x32 tiles (the remainder cropped), one sequence of 16 patches per
//       tile. An image of at most 32x32 pixels has no tiles: the path may
//       carry no token at all (allow_zero_tokens).
// Each patch: h = W_path x + b_path + pos(its index in the sequence); then
// one attention layer shared by both paths (2 heads of 8, within the
// sequence): y = h + W_o attention(W_q h, W_k h, W_v h). Outputs:
//   "tokens" (primary): the item's 16 global rows, then 16 rows per tile;
//   "pooled": one row per item, the mean of its "tokens" rows.
// The forward writes a sequence's rows and its mean row; postprocess_outputs
// merges the paths. Weights come from the config's `seed` (see `weight`);
// tests/loader/check_two_path_newcomer.py computes the model in float64 numpy.
//
// Build with -DTWO_PATH_NEWCOMER_ZERO_OFFSETS for the deliberately broken
// variant: cu_seqlens declared with zero padding instead of repeat-last, so a
// batch smaller than its graph ends its offsets with 0; `encgraph verify` must
// reject it, naming the buffer 'cu_seqlens'.
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
constexpr int64_t kPatchDim = kPatch * kPatch * kChannels;     // 192
constexpr int64_t kView = 32;                                  // global view and tile side
constexpr int64_t kSeq = (kView / kPatch) * (kView / kPatch);  // 16 patches per sequence
constexpr int64_t kHidden = 16;
constexpr int64_t kHeads = 2;
constexpr int64_t kHeadDim = kHidden / kHeads;
constexpr int64_t kMaxSide = 2048;  // 4096 tiles at most: sizes stay far from overflow
enum Path : int32_t { kGlobal = 0, kLocal = 1 };
enum Buffer : int32_t { kPixels = 0, kCuSeqlens = 1 };
enum Output : int32_t { kTokens = 0, kPooled = 1 };
// Which weight a value belongs to (part of the weights' definition, see weight()).
enum Tensor : uint64_t {
  kWGlobal = 0,
  kWLocal = 1,
  kBGlobal = 2,
  kBLocal = 3,
  kWq = 4,
  kWk = 5,
  kWv = 6,
  kWo = 7
};

#ifdef TWO_PATH_NEWCOMER_ZERO_OFFSETS
constexpr eg_padding_logic kOffsetsPadding = EG_PAD_ZERO;  // the bug
#else
constexpr eg_padding_logic kOffsetsPadding = EG_PAD_REPEAT_LAST;  // padding: empty sequences
#endif

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Weight k of tensor `t`: uniform in [-scale, scale), from the config's seed.
float weight(uint64_t seed, Tensor t, uint64_t k, double scale) {
  const uint64_t z = splitmix64(splitmix64(seed * 8 + t) + k);
  return static_cast<float>((static_cast<double>(z >> 40) / 8388608.0 - 1.0) * scale);
}

uint8_t draw(uint64_t seed, uint64_t k) {
  return static_cast<uint8_t>(splitmix64(seed ^ (k << 20)) >> 56);
}

// Sequences in a shape: every sequence holds kSeq tokens, so a budget of n
// tokens holds at most ceil(n / kSeq) of them (eager shapes included).
int64_t max_sequences(const eg_graph_shape& s) {
  return (s.token_budget + kSeq - 1) / kSeq;
}

class TwoPathNewcomer {
 public:
  static constexpr sdk::Identity identity{"two_path_newcomer", "1.0.0",
                                          "global 32x32 view + 32x32 tiles, patch embedding and "
                                          "attention per look, merged: the newcomer's example",
                                          EG_MODALITY_IMAGE, EG_DEVICE_CPU};

  struct Item {
    int64_t tiles = 0;
    std::vector<float> global;  // kSeq x kPatchDim
    std::vector<float> local;   // tiles * kSeq x kPatchDim
  };

  explicit TwoPathNewcomer(sdk::CreateArgs& args) {
    if (args.device() != EG_DEVICE_CPU)
      sdk::fail(EG_ERR_UNSUPPORTED, "two_path_newcomer runs on the CPU only");
    if (args.weights() && *args.weights() != "random")
      sdk::invalid(
          "two_path_newcomer draws its weights from [plugin.config] seed; leave "
          "plugin.weights unset or set it to \"random\"");
    draw_weights(static_cast<uint64_t>(args.config.get<int64_t>("seed", 0, {0, 1ll << 40})));
    info_.path("global", "view patches")
        .path("local", "tile patches", sdk::PathOptions{0, /*allow_zero_tokens=*/true})
        .buffer("pixels", EG_DTYPE_F32)  // [budget, 192] on both paths
        .buffer("cu_seqlens", EG_DTYPE_I32, kOffsetsPadding)
        .output("tokens", kHidden, EG_DTYPE_F32)
        .output("pooled", kHidden, EG_DTYPE_F32, /*rows_per_item=*/1);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {kSeq, 64 * kSeq}; }

  Item item_create(const eg_item_desc& d) const {
    if (d.modality != EG_MODALITY_IMAGE || d.frames != 1)
      sdk::fail(EG_ERR_UNSUPPORTED, "two_path_newcomer encodes single images only");
    if (d.height < 1 || d.width < 1 || d.height > kMaxSide || d.width > kMaxSide)
      sdk::invalid("two_path_newcomer: image height and width must be in [1, 2048], got " +
                   std::to_string(d.height) + "x" + std::to_string(d.width));
    if (d.pixels && d.channels != kChannels)
      sdk::invalid("two_path_newcomer: pixels must be RGB (3 channels), got " +
                   std::to_string(d.channels));
    const int64_t h = d.height, w = d.width;
    auto px = [&](int64_t y, int64_t x, int64_t c) {
      const int64_t k = (y * w + x) * kChannels + c;
      return (d.pixels ? d.pixels[k] : draw(d.seed, static_cast<uint64_t>(k))) / 255.0f - 0.5f;
    };
    Item it;
    // The global view: box averages over [y0, y1) x [x0, x1), each at least one pixel.
    std::vector<float> view(kView * kView * kChannels);
    for (int64_t vy = 0; vy < kView; ++vy)
      for (int64_t vx = 0; vx < kView; ++vx) {
        const int64_t y0 = vy * h / kView, y1 = std::max(y0 + 1, (vy + 1) * h / kView);
        const int64_t x0 = vx * w / kView, x1 = std::max(x0 + 1, (vx + 1) * w / kView);
        for (int64_t c = 0; c < kChannels; ++c) {
          float sum = 0.0f;
          for (int64_t y = y0; y < y1; ++y)
            for (int64_t x = x0; x < x1; ++x) sum += px(y, x, c);
          view[(vy * kView + vx) * kChannels + c] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
        }
      }
    it.global = patches_of(
        [&](int64_t y, int64_t x, int64_t c) { return view[(y * kView + x) * kChannels + c]; });
    // Local tiles, only for an image larger than the view.
    const int64_t th = h / kView, tw = w / kView;
    it.tiles = h * w > kView * kView ? th * tw : 0;
    for (int64_t t = 0; t < it.tiles; ++t) {
      const std::vector<float> tile = patches_of([&](int64_t y, int64_t x, int64_t c) {
        return px((t / tw) * kView + y, (t % tw) * kView + x, c);
      });
      it.local.insert(it.local.end(), tile.begin(), tile.end());
    }
    return it;
  }

  // path_tokens in each path's unit (patches of the view, patches of the tiles).
  sdk::ItemSpec item_spec(const Item& it) const {
    const int64_t rows = kSeq + it.tiles * kSeq;
    return {rows, rows, 1, {kSeq, it.tiles * kSeq}};
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    if (buffer == kCuSeqlens) return {max_sequences(s) + 1};
    return {s.token_budget, kPatchDim};
  }

  // "pooled" holds one row per sequence (an item's on the global path, a
  // tile's on the local one), which postprocess_outputs averages per item.
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t output) const {
    if (output == kPooled) return {max_sequences(s), kHidden};
    return {s.token_budget, kHidden};
  }

  // h, q, k, v, the attention's output (kSeq x 16 each) and kSeq scores.
  size_t workspace_size(const eg_graph_shape&) const {
    return static_cast<size_t>((5 * kHidden + 1) * kSeq) * sizeof(float);
  }

  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.get<float>(kPixels).set_rows(0);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    for (int64_t end = kSeq; end <= s.token_budget; end += kSeq) cu.push(static_cast<int32_t>(end));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    sdk::Staging<float> pixels = buffers.get<float>(kPixels);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    for (const Item& it : items) {
      const int64_t sequences = s.path == kGlobal ? 1 : it.tiles;
      const float* src = s.path == kGlobal ? it.global.data() : it.local.data();
      for (int64_t q = 0; q < sequences; ++q) {
        pixels.append(src + q * kSeq * kPatchDim, kSeq);
        cu.push(static_cast<int32_t>(pixels.rows_written()));
      }
    }
  }

  // One path's sequences: token rows and one mean row per sequence. Rows past
  // the last offset are zero; a padding sequence (offsets not increasing) is
  // empty.
  void forward(const sdk::ForwardArgs& args) {
    const auto pixels = args.buffer<float>(kPixels);
    const auto cu = args.buffer<int32_t>(kCuSeqlens);
    const auto tokens = args.output<float>(kTokens);
    const auto pooled = args.output<float>(kPooled);
    const std::vector<float>& we = args.path() == kGlobal ? w_global_ : w_local_;
    const std::vector<float>& be = args.path() == kGlobal ? b_global_ : b_local_;
    float* ws = static_cast<float*>(args.workspace());
    float *h = ws, *q = h + kSeq * kHidden, *k = q + kSeq * kHidden, *v = k + kSeq * kHidden,
          *att = v + kSeq * kHidden, *scores = att + kSeq * kHidden;
    const int64_t seqs = cu.rows() - 1;
    if (seqs > pooled.rows() || cu.at(seqs) > tokens.rows())
      sdk::invalid("two_path_newcomer: offsets past the budget");
    for (int64_t s = 0; s < seqs; ++s) {
      const int64_t first = cu.at(s), n = cu.at(s + 1) - first;
      std::fill_n(pooled.row(s), kHidden, 0.0f);
      if (n <= 0) continue;
      if (n > kSeq) sdk::invalid("two_path_newcomer: a sequence of more than 16 patches");
      for (int64_t t = 0; t < n; ++t) embed(pixels.row(first + t), t, we, be, h + t * kHidden);
      project(h, n, wq_, q);
      project(h, n, wk_, k);
      project(h, n, wv_, v);
      attention(q, k, v, n, scores, att);
      for (int64_t t = 0; t < n; ++t) {
        float* y = tokens.row(first + t);
        for (int64_t j = 0; j < kHidden; ++j) {
          float sum = h[t * kHidden + j];
          for (int64_t i = 0; i < kHidden; ++i) sum += wo_[j * kHidden + i] * att[t * kHidden + i];
          y[j] = sum;
          pooled.at(s, j) += sum / static_cast<float>(n);
        }
      }
    }
    for (int64_t r = std::max<int64_t>(0, cu.at(seqs)); r < tokens.rows(); ++r)
      std::fill_n(tokens.row(r), kHidden, 0.0f);
  }

  // Item i: its 16 global rows, then its tiles' rows; pooled: the mean of its
  // sequences' means (every sequence has 16 rows, so the mean of its rows).
  void postprocess_outputs(const sdk::PostprocessArgs<Item>& a) {
    const auto global = a.output<float>(kGlobal, kTokens);
    const auto gpool = a.output<float>(kGlobal, kPooled);
    const bool local_used = a.path_used(kLocal);
    int64_t tile = 0;  // the local path's sequence of the item's first tile
    for (int64_t i = 0; i < a.num_items(); ++i) {
      const int64_t tiles = a.items()[i].tiles;
      const auto tokens = a.result<float>(kTokens, i);
      const auto pooled = a.result<float>(kPooled, i);
      global.check_rows(i * kSeq, kSeq);
      tokens.check_rows(0, kSeq + tiles * kSeq);
      std::copy_n(global.row(i * kSeq), kSeq * kHidden, tokens.row(0));
      for (int64_t j = 0; j < kHidden; ++j) pooled.at(0, j) = gpool.at(i, j);
      if (tiles > 0) {
        if (!local_used) sdk::fail(EG_ERR_INTERNAL, "two_path_newcomer: tiles but no local path");
        const auto local = a.output<float>(kLocal, kTokens);
        const auto lpool = a.output<float>(kLocal, kPooled);
        local.check_rows(tile * kSeq, tiles * kSeq);
        std::copy_n(local.row(tile * kSeq), tiles * kSeq * kHidden, tokens.row(kSeq));
        for (int64_t t = tile; t < tile + tiles; ++t)
          for (int64_t j = 0; j < kHidden; ++j) pooled.at(0, j) += lpool.at(t, j);
      }
      for (int64_t j = 0; j < kHidden; ++j) pooled.at(0, j) /= static_cast<float>(1 + tiles);
      tile += tiles;
    }
  }

 private:
  // The 16 patches of a 32x32 picture `at(y, x, c)`, each (y, x, channel).
  template <class At>
  static std::vector<float> patches_of(At at) {
    std::vector<float> out;
    out.reserve(static_cast<size_t>(kSeq * kPatchDim));
    for (int64_t p = 0; p < kSeq; ++p)
      for (int64_t y = 0; y < kPatch; ++y)
        for (int64_t x = 0; x < kPatch; ++x)
          for (int64_t c = 0; c < kChannels; ++c)
            out.push_back(
                at((p / (kView / kPatch)) * kPatch + y, (p % (kView / kPatch)) * kPatch + x, c));
    return out;
  }

  void draw_weights(uint64_t seed) {
    auto fill = [&](std::vector<float>& w, Tensor t, int64_t n, int64_t fan_in) {
      w.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        w[i] =
            weight(seed, t, static_cast<uint64_t>(i), 1.0 / std::sqrt(static_cast<double>(fan_in)));
    };
    fill(w_global_, kWGlobal, kHidden * kPatchDim, kPatchDim);  // row-major [out][in]
    fill(w_local_, kWLocal, kHidden * kPatchDim, kPatchDim);
    fill(b_global_, kBGlobal, kHidden, 1);
    fill(b_local_, kBLocal, kHidden, 1);
    fill(wq_, kWq, kHidden * kHidden, kHidden);
    fill(wk_, kWk, kHidden * kHidden, kHidden);
    fill(wv_, kWv, kHidden * kHidden, kHidden);
    fill(wo_, kWo, kHidden * kHidden, kHidden);
  }

  // h = W x + b + pos(t): sin at even columns, cos at odd, 10000^(2i/16).
  static void embed(const float* x, int64_t t, const std::vector<float>& w,
                    const std::vector<float>& b, float* h) {
    for (int64_t j = 0; j < kHidden; ++j) {
      float sum = b[j];
      for (int64_t i = 0; i < kPatchDim; ++i) sum += w[j * kPatchDim + i] * x[i];
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

  std::vector<float> w_global_, w_local_, b_global_, b_local_, wq_, wk_, wv_, wo_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(TwoPathNewcomer)
