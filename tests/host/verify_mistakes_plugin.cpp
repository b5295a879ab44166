// verify_mistakes: a small SDK plugin that makes, on request, the mistakes
// plugin authors make most, so the tests can show that `encgraph verify`
// catches each one and names what to fix. Never installed.
//
// The model: an image of height h gives ceil(h / 8) tokens; token t of an item
// holds a value drawn from the item's seed. Output "rows" (the primary) has
// one row per token: [value * min(t + 1, capacity), t], where capacity is the
// batch's capture-axis key "capacity" (the most tokens per item the forward
// treats in full: keys 8, 32, 128). Output "pooled" has one row per item: the
// mean of its values. Buffers: "values" [budget, 1] and "cu_seqlens"
// [max_batch_size + 1] (the items' row offsets).
//
// Config key `mistake`:
//   "none"                 every rule kept (verify passes)
//   "zero_cu_seqlens"      cu_seqlens declared zero-padded: padded offsets of 0
//                          end the batch at row 0, and the forward zeroes it
//   "axis_key_first_item"  select_axis_keys serves the batch's first item only
//   "pooled_rows_plus_one" "pooled" declared with 2 rows per item; the forward
//                          writes 1
//   "rows_minus_one"       item_spec declares one output row fewer than the
//                          forward writes for the item
#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sdk = encgraph::sdk;

namespace {

enum class Mistake { None, ZeroCuSeqlens, AxisKeyFirstItem, PooledRowsPlusOne, RowsMinusOne };
enum Buffer : int32_t { kValues = 0, kCuSeqlens = 1 };
const std::vector<int64_t> kCapacities = {8, 32, 128};

Mistake parse_mistake(const std::string& s) {
  if (s == "none") return Mistake::None;
  if (s == "zero_cu_seqlens") return Mistake::ZeroCuSeqlens;
  if (s == "axis_key_first_item") return Mistake::AxisKeyFirstItem;
  if (s == "pooled_rows_plus_one") return Mistake::PooledRowsPlusOne;
  if (s == "rows_minus_one") return Mistake::RowsMinusOne;
  sdk::invalid("mistake = \"" + s +
               "\" is not one of none, zero_cu_seqlens, axis_key_first_item, "
               "pooled_rows_plus_one, rows_minus_one");
}

class VerifyMistakes {
 public:
  static constexpr sdk::Identity identity{"verify_mistakes", "1.0.0",
                                          "test plugin: the padding and shape mistakes verify "
                                          "must catch",
                                          EG_MODALITY_IMAGE, EG_DEVICE_CPU};

  struct Item {
    std::vector<float> values;
  };

  explicit VerifyMistakes(sdk::CreateArgs& args)
      : mistake_(parse_mistake(args.config.get<std::string>("mistake", "none"))) {
    if (args.device() != EG_DEVICE_CPU) sdk::fail(EG_ERR_UNSUPPORTED, "CPU only");
    const eg_padding_logic cu_padding =
        mistake_ == Mistake::ZeroCuSeqlens ? EG_PAD_ZERO : EG_PAD_REPEAT_LAST;
    info_.path("default", "tokens")
        .buffer("values", EG_DTYPE_F32)
        .buffer("cu_seqlens", EG_DTYPE_I32, cu_padding)
        .output("rows", 2, EG_DTYPE_F32)
        .output("pooled", 1, EG_DTYPE_F32, mistake_ == Mistake::PooledRowsPlusOne ? 2 : 1)
        .capture_axis("capacity", kCapacities);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {16, 256}; }

  Item item_create(const eg_item_desc& d) const {
    if (d.height <= 0 || d.height > 1024 || d.frames != 1)
      sdk::invalid("images of height 1 to 1024 only");
    Item it;
    uint64_t z = d.seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t t = 0; t < (d.height + 7) / 8; ++t) {
      z ^= z >> 29;
      z *= 0xBF58476D1CE4E5B9ull;
      it.values.push_back(static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) + 0.5f);
    }
    return it;
  }

  sdk::ItemSpec item_spec(const Item& it) const {
    const int64_t tokens = static_cast<int64_t>(it.values.size());
    const int64_t rows = mistake_ == Mistake::RowsMinusOne ? tokens - 1 : tokens;
    return {tokens, rows, 1, {tokens}};
  }

  // The smallest capacity that holds every item of the batch in full (the
  // mistake: the first item's).
  std::vector<int64_t> select_axis_keys(const sdk::Batch<Item>& items) const {
    int64_t need = 0;
    for (const Item& it : items) {
      need = std::max<int64_t>(need, static_cast<int64_t>(it.values.size()));
      if (mistake_ == Mistake::AxisKeyFirstItem) break;
    }
    for (int64_t key : kCapacities)
      if (key >= need) return {key};
    return {kCapacities.back()};
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    if (buffer == kValues) return {s.token_budget, 1};
    return {s.max_batch_size + 1};
  }

  sdk::Shape output_shape(const eg_graph_shape& s, int32_t output) const {
    if (output == 0) return {s.token_budget + s.max_batch_size, 2};  // room for rows_minus_one
    return {s.max_batch_size * info_.raw().outputs[1].rows_per_item, 1};
  }

  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    cu.push(static_cast<int32_t>(s.token_budget));
    buffers.get<float>(kValues).set_rows(0);
  }

  void prepare_replay_buffers(const eg_graph_shape&, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    sdk::Staging<float> values = buffers.get<float>(kValues);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(kCuSeqlens);
    cu.push(0);
    for (const Item& it : items) {
      values.append(it.values.data(), static_cast<int64_t>(it.values.size()));
      cu.push(static_cast<int32_t>(values.rows_written()));
    }
  }

  // Rows follow cu_seqlens; rows from its last offset on, and empty
  // sequences' pooled rows, are zero (so zero-padded offsets, which end the
  // batch at row 0, zero the whole output).
  void forward(const sdk::ForwardArgs& args) {
    const auto x = args.buffer<float>(kValues);
    const auto cu = args.buffer<int32_t>(kCuSeqlens);
    const auto rows = args.output<float>(0);
    const auto pooled = args.output<float>(1);
    const int64_t capacity = args.shape().num_axis_keys > 0 ? args.shape().axis_keys[0] : 1;
    const int64_t seqs = cu.rows() - 1;
    for (int64_t s = 0; s < seqs; ++s) {
      const int64_t begin = cu.at(s), end = std::max<int64_t>(cu.at(s + 1), begin);
      if (end > x.rows()) sdk::invalid("offsets past the budget");
      double sum = 0.0;
      for (int64_t r = begin; r < end; ++r) {
        const int64_t t = r - begin;
        rows.at(r, 0) = x.at(r) * static_cast<float>(std::min(t + 1, capacity));
        rows.at(r, 1) = static_cast<float>(t);
        sum += x.at(r);
      }
      if (s < pooled.rows())  // one row per item, whatever rows_per_item declares
        pooled.at(s * info_.raw().outputs[1].rows_per_item) =
            end > begin ? static_cast<float>(sum / static_cast<double>(end - begin)) : 0.0f;
    }
    for (int64_t r = std::max<int64_t>(cu.at(seqs), 0); r < rows.rows(); ++r)
      rows.at(r, 0) = rows.at(r, 1) = 0.0f;
  }

 private:
  Mistake mistake_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(VerifyMistakes)
