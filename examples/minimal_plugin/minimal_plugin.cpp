// minimal: a complete encgraph plugin on the C++ SDK (<encgraph/sdk/sdk.hpp>),
// CPU only, plugin ABI 1.1.
//
// The "encoder" cuts an RGB image into 8x8 patches; each patch becomes one row
// of the output "patch_means": the patch's mean red, green and blue (times the
// config's `scale`) and the patch's index within its image. It is not a model;
// it shows every duty a plugin has: configuration, items, buffers with two
// padding logics, host-staged capture inputs, replay staging and a graph-safe
// forward. The SDK writes the table, the guards and the size-safe copies.
//
// Build it out of tree against an installed encgraph (see CMakeLists.txt and
// docs/writing-a-plugin.md), then: encgraph plugins --plugin-dir <build dir>
#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sdk = encgraph::sdk;

namespace {

constexpr int64_t kPatch = 8;
constexpr int64_t kChannels = 3;
constexpr int64_t kHidden = kChannels + 1;  // channel means + the patch's index
enum Buffer : int32_t { kPatches = 0, kCuSeqlens = 1 };

// A deterministic value in [0, 1) from a seed and a position (synthetic items).
float draw(uint64_t seed, uint64_t k) {
  uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  return static_cast<float>(z >> 40) / static_cast<float>(1ull << 24);
}

class Minimal {
 public:
  static constexpr sdk::Identity identity{"minimal", "2.0.0",
                                          "8x8 patch means: the out-of-tree example plugin",
                                          EG_MODALITY_IMAGE, EG_DEVICE_CPU};

  struct Item {
    int64_t tokens = 0;
    std::vector<float> patches;  // tokens x kChannels
  };

  explicit Minimal(sdk::CreateArgs& args) {
    if (args.device() != EG_DEVICE_CPU)
      sdk::fail(EG_ERR_UNSUPPORTED, "minimal runs on the CPU only");
    if (args.weights() && *args.weights() != "random")
      sdk::invalid("minimal has no weights; leave weights unset or use \"random\"");
    scale_ = args.config.get<float>("scale", 1.0f, {-1e6f, 1e6f});
    info_.path("default", "patches")
        .buffer("patches", EG_DTYPE_F32)
        .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)  // padding: empty sequences
        .output("patch_means", kHidden, EG_DTYPE_F32);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {16, 1024}; }

  Item item_create(const eg_item_desc& d) const {
    if (d.modality != EG_MODALITY_IMAGE || d.frames != 1)
      sdk::fail(EG_ERR_UNSUPPORTED, "minimal encodes single images only");
    if (d.height <= 0 || d.width <= 0 || d.height > 65536 || d.width > 65536)
      sdk::invalid("image height and width must be in [1, 65536]");
    if (d.pixels && d.channels != kChannels) sdk::invalid("pixels must be RGB (3 channels)");
    const int64_t ph = std::max<int64_t>(1, d.height / kPatch);
    const int64_t pw = std::max<int64_t>(1, d.width / kPatch);
    Item it{ph * pw, std::vector<float>(static_cast<size_t>(ph * pw * kChannels))};
    for (int64_t t = 0; t < it.tokens; ++t) {
      for (int64_t c = 0; c < kChannels; ++c) {
        float& mean = it.patches[t * kChannels + c];
        if (!d.pixels) {
          mean = draw(d.seed, static_cast<uint64_t>(t * kChannels + c));
          continue;
        }
        float sum = 0.0f;
        int64_t n = 0;
        for (int64_t y = (t / pw) * kPatch; y < (t / pw + 1) * kPatch && y < d.height; ++y)
          for (int64_t x = (t % pw) * kPatch; x < (t % pw + 1) * kPatch && x < d.width; ++x, ++n)
            sum += d.pixels[(y * d.width + x) * kChannels + c] / 255.0f;
        mean = n > 0 ? sum / static_cast<float>(n) : 0.0f;
      }
    }
    return it;
  }

  // One path: path_tokens[0] counts patches, the path's declared unit.
  sdk::ItemSpec item_spec(const Item& it) const { return {it.tokens, it.tokens, 1, {it.tokens}}; }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    if (buffer == kPatches) return {s.token_budget, kChannels};  // one row per patch
    return {s.max_batch_size + 1};                               // offsets, plus the end
  }

  // Warm-up and capture: one sequence over every row (host staging, no device calls).
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    cu.push(static_cast<int32_t>(s.token_budget));
    buffers.get<float>(kPatches).set_rows(0);
  }

  // A batch's real rows; the runtime pads the rest (zeros, the last offset).
  void prepare_replay_buffers(const eg_graph_shape&, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    sdk::Staging<float> patches = buffers.get<float>(kPatches);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    for (const Item& it : items) {
      patches.append(it.patches.data(), it.tokens);
      cu.push(static_cast<int32_t>(patches.rows_written()));
    }
  }

  // Graph-safe: reads only the buffers, writes only the output; padding rows are 0.
  void forward(const sdk::ForwardArgs& args) {
    const float* x = args.buffer<float>(kPatches).data();
    const auto cu = args.buffer<int32_t>(kCuSeqlens);
    const auto out = args.output<float>(0);
    const int64_t seqs = cu.rows() - 1;
    if (cu.at(seqs) > out.rows()) sdk::invalid("offsets past the budget");
    for (int64_t s = 0; s < seqs; ++s)
      for (int64_t r = cu.at(s); r < cu.at(s + 1); ++r) {
        for (int64_t c = 0; c < kChannels; ++c) out.at(r, c) = scale_ * x[r * kChannels + c];
        out.at(r, kChannels) = static_cast<float>(r - cu.at(s));
      }
    for (int64_t r = cu.at(seqs); r < out.rows(); ++r)
      for (int64_t c = 0; c < kHidden; ++c) out.at(r, c) = 0.0f;
  }

 private:
  float scale_ = 1.0f;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(Minimal)
