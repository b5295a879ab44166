// DeepSeek-OCR-2's vision side as an encgraph plugin ("deepseek_ocr2"), one
// model class on the plugin SDK (docs/sdk.md): transformers'
// DeepseekOcr2Model.get_image_features (docs/models/deepseek_ocr2.md).
//
// Two paths, each its own graphs and buffers: `global` (every image's one
// global_size view, 256 query tokens at the released sizes) and `local` (the
// image's 0..max_crops tile_size crops, 144 tokens each; an image smaller than
// one tile sends none: allow_zero_tokens). Budgets and path_tokens count each
// path's output rows ("query tokens"); a graph of budget B holds B / tokens
// views. postprocess_outputs assembles every image's rows in transformers'
// order: its crops' rows, its global rows, then view_separator.
//
// Buffers (dsocr2_layout.hpp): the path's views as planar pixels, and the
// batch's real view count (the forward skips padded views).
//
// Config keys: config_json (DeepSeek's release config.json or transformers'),
// patch_size, sam_image_size, sam_hidden_size, sam_layers, sam_heads,
// sam_mlp_dim, window_size, global_attn_indexes, neck_channels,
// downsample_channels, encoder_layers, encoder_heads, encoder_kv_heads,
// encoder_intermediate_size, rope_theta, text_hidden_size (each overrides
// config_json), global_size, tile_size, min_crops, max_crops (the processor),
// dtype (f32 on the CPU, bf16 on CUDA), min_budget, max_budget, seed,
// check_finite, tune_gemm, tuning_cache (CUDA). Weights: a .safetensors file,
// a checkpoint folder / index json (release or transformers names, detected;
// the language model's tensors are ignored), or "random".
//
// CUDA (dsocr2_cuda_model.hpp, behind dsocr2_backend.hpp): pixels are staged
// as bf16, outputs are bf16, and postprocess_outputs assembles the rows with
// device copies on the runtime's stream.
#include "dsocr2_backend.hpp"
#include "dsocr2_config.hpp"
#include "dsocr2_layout.hpp"
#include "dsocr2_work.hpp"

#include <encgraph/sdk/sdk.hpp>

#include <string>
#include <vector>

namespace {

namespace sdk = encgraph::sdk;

class DeepseekOcr2 {
 public:
  static constexpr sdk::Identity identity{
      "deepseek_ocr2", "0.1.0",
      "DeepSeek-OCR-2 vision side (SAM ViT-B + Qwen2 encoder), global and local paths",
      EG_MODALITY_IMAGE, dsocr2::kDevices};
  // Items are made from the options alone (no shared state): the runtime may
  // make a batch's items on several threads (ABI 1.4).
  static constexpr bool concurrent_items = true;
  using Item = dsocr2::ItemData;

  explicit DeepseekOcr2(sdk::CreateArgs& args)
      : opt_(dsocr2::parse_options(args.config, args.raw)),
        backend_(opt_, args.weights().value_or("random"), args.device(), args.device_index()) {
    const dsocr2::ModelConfig& c = opt_.model;
    const eg_dtype dtype = opt_.dtype == dsocr2::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    // In dsocr2::Path and dsocr2::Buffer order. An image smaller than one
    // tile sends no tokens down `local`.
    info_.path("global", "query tokens", {c.global_tokens(), false})
        .path("local", "query tokens", {c.local_tokens(), true})
        .output("image_features", c.text_hidden_size, dtype)
        .buffer("pixels", dtype)
        .buffer("view_count", EG_DTYPE_I32);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {opt_.min_budget, opt_.max_budget}; }

  Item item_create(const eg_item_desc& d) const {
    const dsocr2::ModelConfig& m = opt_.model;
    dsocr2::check_geometry(d);
    Item item;
    item.views = d.pixels ? dsocr2::preprocess(m, d.pixels, d.height, d.width, d.channels)
                          : dsocr2::synthetic_views(m, d.height, d.width, d.seed);
    if (opt_.dtype == dsocr2::Dtype::BF16) item.to_bf16();
    return item;
  }
  sdk::ItemSpec item_spec(const Item& item) const { return spec_of(item.views.num_crops); }
  // 1.2: the spec before any pixels exist: the crop grid from the geometry alone.
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    dsocr2::check_geometry(d);
    return spec_of(dsocr2::crop_grid(opt_.model, d.height, d.width).count());
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    const int64_t side = dsocr2::view_side(opt_.model, s.path);
    if (buffer == dsocr2::kPixels) return {capacity(s), 3 * side * side};
    return {1};  // kViewCount
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t) const {
    capacity(s);  // checks the path
    return {s.token_budget, opt_.model.text_hidden_size};
  }
  size_t workspace_size(const eg_graph_shape& s) const {
    return backend_.workspace_bytes(dsocr2::view_side(opt_.model, s.path), capacity(s));
  }

  // Warm-up values: zero views (finite), all of the graph's capacity used.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.leave(dsocr2::kPixels);
    buffers.get<int32_t>(dsocr2::kViewCount).push(static_cast<int32_t>(capacity(s)));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    sdk::UntypedStaging pixels = buffers.untyped(dsocr2::kPixels);
    // stage_views fills up to the graph's capacity: the rows buffer_shape gave.
    if (pixels.rows() < capacity(s))
      sdk::fail(EG_ERR_INTERNAL, "deepseek_ocr2: pixel staging holds " +
                                     std::to_string(pixels.rows()) + " views, not " +
                                     std::to_string(capacity(s)));
    const int64_t views = dsocr2::stage_views(opt_.model, s.path, batch, pixels.data(), capacity(s),
                                              opt_.dtype == dsocr2::Dtype::BF16);
    pixels.set_rows(views);
    buffers.get<int32_t>(dsocr2::kViewCount).push(static_cast<int32_t>(views));
  }

  // The graph path's warm-up times the CUDA products' algorithms for its
  // size; eager runs (a new size each time) do not.
  void forward(const sdk::ForwardArgs& args) { run(args, opt_.tune_gemm); }
  void forward_eager(const sdk::ForwardArgs& args) { run(args, false); }

  // Every image's rows: its crops (from the local path's output, crop order),
  // its global view, then view_separator; items in batch order on both paths.
  void postprocess_outputs(const sdk::PostprocessArgs<Item>& args) {
    const dsocr2::ModelConfig& m = opt_.model;
    bool crops = false;
    for (const Item& it : args.items()) crops = crops || it.views.num_crops > 0;
    if (!args.path_used(dsocr2::kGlobal) || (crops && !args.path_used(dsocr2::kLocal)))
      sdk::invalid("deepseek_ocr2: a path this batch uses has no output");
    const void* global = args.output_data(dsocr2::kGlobal, 0);
    const void* local = crops ? args.output_data(dsocr2::kLocal, 0) : nullptr;
    int64_t crop = 0;
    for (int64_t k = 0; k < args.num_items(); ++k) {
      const Item& it = args.items()[k];
      backend_.assemble(it, local, crop * m.local_tokens(), global, k * m.global_tokens(),
                        args.result_data(0, k), args.stream());
      crop += it.views.num_crops;
    }
  }

 private:
  // Views a graph of this shape holds (its path checked).
  int64_t capacity(const eg_graph_shape& s) const {
    return dsocr2::view_capacity(opt_.model, s.path, s.token_budget);
  }

  // The spec of an image with `crops` local crops.
  sdk::ItemSpec spec_of(int64_t crops) const {
    const dsocr2::ModelConfig& m = opt_.model;
    Item it;
    it.views.num_crops = crops;
    // input_size: the global view's and the crops' FLOPs in SAM-patch-equivalents.
    sdk::ItemSpec spec{dsocr2::image_work(m, crops), it.output_rows(m), 1, {}};
    spec.path_tokens[dsocr2::kGlobal] = it.path_tokens(m, dsocr2::kGlobal);
    spec.path_tokens[dsocr2::kLocal] = it.path_tokens(m, dsocr2::kLocal);
    return spec;
  }

  void run(const sdk::ForwardArgs& args, bool tune) {
    backend_.forward(dsocr2::view_side(opt_.model, args.path()), capacity(args.shape()),
                     args.buffers(), args.output_data(0), args.workspace(), args.workspace_size(),
                     args.stream(), tune);
  }

  dsocr2::Options opt_;  // first: the backend and the description are made from it
  dsocr2::Backend backend_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(DeepseekOcr2)
