// two_path: an encgraph plugin with two paths of different shapes and a
// post-processing step that merges them, on the C++ SDK (ABI 1.1, CPU only).
//
//   path "global": the image box-downscaled to an 8x8 view, cut into 4 patches
//                  of 4x4 view pixels; a token is 48 values (unit: "view patches").
//   path "local":  the image cut into `tile` x `tile` tiles at full resolution
//                  (edge pixels repeated past the border); a token is tile*tile*3
//                  values (unit: "tiles").
// Both run the same forward: per token, the mean of each channel times `scale`,
// then the token's position in the item's merged sequence. Outputs:
//   "tokens" (primary): the item's 4 global rows, then its local rows;
//   "pooled": one row per item, the average of the two paths' token means.
// postprocess_outputs builds both from the paths' outputs. Paths and capture
// axes exclude each other, so this model has no capture axes.
#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sdk = encgraph::sdk;

namespace {

constexpr int64_t kChannels = 3;
constexpr int64_t kView = 8;          // the global view is kView x kView pixels
constexpr int64_t kViewPatch = 4;     // ... cut into patches of kViewPatch^2 pixels
constexpr int64_t kGlobalTokens = 4;  // (kView / kViewPatch)^2
constexpr int64_t kTokenWidth = 4;    // channel means + position
enum Path : int32_t { kGlobal = 0, kLocal = 1 };
enum Buffer : int32_t { kPixels = 0, kCuSeqlens = 1 };
enum Output : int32_t { kTokens = 0, kPooled = 1 };

// A deterministic byte from a seed and a position (synthetic items).
uint8_t draw(uint64_t seed, uint64_t k) {
  uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  return static_cast<uint8_t>(z >> 56);
}

class TwoPath {
 public:
  static constexpr sdk::Identity identity{"two_path", "1.0.0",
                                          "global view + local tiles, merged: the two-path example",
                                          EG_MODALITY_IMAGE, EG_DEVICE_CPU};

  struct Item {
    int64_t tiles = 0;
    std::vector<float> global;  // kGlobalTokens x (kViewPatch^2 * 3)
    std::vector<float> local;   // tiles x (tile^2 * 3)
  };

  explicit TwoPath(sdk::CreateArgs& args) {
    if (args.device() != EG_DEVICE_CPU)
      sdk::fail(EG_ERR_UNSUPPORTED, "two_path runs on the CPU only");
    if (args.weights() && *args.weights() != "random")
      sdk::invalid("two_path has no weights; leave weights unset or use \"random\"");
    scale_ = args.config.get<float>("scale", 1.0f, {-1e6f, 1e6f});
    tile_ = args.config.get<int64_t>("tile", 16, {4, 64});
    info_.path("global", "view patches")
        .path("local", "tiles")
        .buffer("pixels", EG_DTYPE_F32)  // its width differs by path
        .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)
        .output("tokens", kTokenWidth, EG_DTYPE_F32)
        .output("pooled", kChannels, EG_DTYPE_F32, /*rows_per_item=*/1);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {16, 1024}; }

  Item item_create(const eg_item_desc& d) const {
    if (d.modality != EG_MODALITY_IMAGE || d.frames != 1)
      sdk::fail(EG_ERR_UNSUPPORTED, "two_path encodes single images only");
    if (d.height <= 0 || d.width <= 0 || d.height > 8192 || d.width > 8192)
      sdk::invalid("image height and width must be in [1, 8192]");
    if (d.pixels && d.channels != kChannels) sdk::invalid("pixels must be RGB (3 channels)");
    const int64_t h = d.height, w = d.width;
    auto px = [&](int64_t y, int64_t x, int64_t c) {  // in [0, 1]
      const int64_t k = (y * w + x) * kChannels + c;
      return (d.pixels ? d.pixels[k] : draw(d.seed, static_cast<uint64_t>(k))) / 255.0f;
    };
    Item it;
    // Global: box-downscale to kView x kView, then 4 patches of 4x4 view pixels.
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
    for (int64_t t = 0; t < kGlobalTokens; ++t)
      for (int64_t y = 0; y < kViewPatch; ++y)
        for (int64_t x = 0; x < kViewPatch; ++x) {
          const int64_t vy = (t / 2) * kViewPatch + y, vx = (t % 2) * kViewPatch + x;
          for (int64_t c = 0; c < kChannels; ++c)
            it.global.push_back(view[(vy * kView + vx) * kChannels + c]);
        }
    // Local: tile x tile tiles of the full image, edge pixels repeated.
    const int64_t th = (h + tile_ - 1) / tile_, tw = (w + tile_ - 1) / tile_;
    it.tiles = th * tw;
    it.local.reserve(static_cast<size_t>(it.tiles * tile_ * tile_ * kChannels));
    for (int64_t t = 0; t < it.tiles; ++t)
      for (int64_t y = 0; y < tile_; ++y)
        for (int64_t x = 0; x < tile_; ++x)
          for (int64_t c = 0; c < kChannels; ++c)
            it.local.push_back(px(std::min(h - 1, (t / tw) * tile_ + y),
                                  std::min(w - 1, (t % tw) * tile_ + x), c));
    return it;
  }

  // path_tokens in each path's unit; the primary output has one row per token.
  sdk::ItemSpec item_spec(const Item& it) const {
    return {kGlobalTokens + it.tiles, kGlobalTokens + it.tiles, 1, {kGlobalTokens, it.tiles}};
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    if (buffer == kCuSeqlens) return {s.max_batch_size + 1};
    return {s.token_budget,
            s.path == kGlobal ? kViewPatch * kViewPatch * kChannels : tile_ * tile_ * kChannels};
  }

  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    cu.push(static_cast<int32_t>(s.token_budget));
    buffers.get<float>(kPixels).set_rows(0);
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    sdk::Staging<float> pixels = buffers.get<float>(kPixels);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    for (const Item& it : items) {
      if (s.path == kGlobal)
        pixels.append(it.global.data(), kGlobalTokens);
      else
        pixels.append(it.local.data(), it.tiles);
      cu.push(static_cast<int32_t>(pixels.rows_written()));
    }
  }

  // Per path: token rows of "tokens", one pooled row per sequence; padding is 0.
  void forward(const sdk::ForwardArgs& args) {
    const auto pixels = args.buffer<float>(kPixels);
    const auto cu = args.buffer<int32_t>(kCuSeqlens);
    const auto tokens = args.output<float>(kTokens);
    const auto pooled = args.output<float>(kPooled);
    const int64_t per_token = pixels.width() / kChannels;
    const int64_t first = args.path() == kGlobal ? 0 : kGlobalTokens;
    const int64_t seqs = cu.rows() - 1;
    if (cu.at(seqs) > tokens.rows() || seqs > pooled.rows())
      sdk::invalid("offsets past the budget");
    std::fill(tokens.data(), tokens.data() + tokens.size(), 0.0f);
    std::fill(pooled.data(), pooled.data() + pooled.size(), 0.0f);
    for (int64_t s = 0; s < seqs; ++s) {
      for (int64_t r = cu.at(s); r < cu.at(s + 1); ++r) {
        const float* p = pixels.row(r);
        for (int64_t c = 0; c < kChannels; ++c) {
          float sum = 0.0f;
          for (int64_t k = 0; k < per_token; ++k) sum += p[k * kChannels + c];
          tokens.at(r, c) = scale_ * sum / static_cast<float>(per_token);
          pooled.at(s, c) += tokens.at(r, c) / static_cast<float>(cu.at(s + 1) - cu.at(s));
        }
        tokens.at(r, kChannels) = static_cast<float>(first + r - cu.at(s));
      }
    }
  }

  // Merges the paths: item i's global rows, then its local rows; pooled averaged.
  void postprocess_outputs(const sdk::PostprocessArgs<Item>& a) {
    const auto global = a.output<float>(kGlobal, kTokens), local = a.output<float>(kLocal, kTokens);
    const auto gpool = a.output<float>(kGlobal, kPooled), lpool = a.output<float>(kLocal, kPooled);
    int64_t local_row = 0;
    for (int64_t i = 0; i < a.num_items(); ++i) {
      const auto tokens = a.result<float>(kTokens, i);
      const int64_t tiles = a.items()[i].tiles;
      global.check_rows(i * kGlobalTokens, kGlobalTokens);
      local.check_rows(local_row, tiles);
      tokens.check_rows(0, kGlobalTokens + tiles);
      std::copy_n(global.row(i * kGlobalTokens), kGlobalTokens * kTokenWidth, tokens.row(0));
      if (tiles > 0)
        std::copy_n(local.row(local_row), tiles * kTokenWidth, tokens.row(kGlobalTokens));
      local_row += tiles;
      const auto pooled = a.result<float>(kPooled, i);
      for (int64_t c = 0; c < kChannels; ++c)
        pooled.at(0, c) = 0.5f * (gpool.at(i, c) + lpool.at(i, c));
    }
  }

 private:
  float scale_ = 1.0f;
  int64_t tile_ = 16;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(TwoPath)
