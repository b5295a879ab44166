// InternVL's image encoder (transformers' InternVLModel.get_image_features:
// InternViT, pixel shuffle, multi_modal_projector) as an encgraph plugin
// ("internvl"), one model class on the plugin SDK (docs/sdk.md).
//
// Items are images. The processor (GotOcr2ImageProcessor, crop_to_patches)
// cuts each into tiles of image_size (internvl_tiling.hpp); every tile is one
// attention sequence of 1 + (image_size / patch_size)^2 rows and yields
// rows_per_tile output rows (256 for InternViT-300M-448px), so an item's
// output is tiles x 256 rows of text_hidden_size: what the language model
// receives. Budgets count those rows ("image tokens"): [rows_per_tile,
// rows_per_tile * max_budget_tiles].
//
// Graph buffers (internvl_batch.hpp): patch rows [tiles x patches, patch_cols]
// (zero padding) and the tiles' encoder-row offsets cu_seqlens (repeat-last
// padding: padded tiles are empty sequences). Padded tiles' rows are computed
// but never attend with a real tile; each output row reads one tile only.
//
// Config keys: config_json (the model's config.json: vision_config and the
// top-level downsample_ratio, vision_feature_layer, text_config.hidden_size),
// hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
// image_size, patch_size, text_hidden_size, layer_norm_eps, norm_type
// ("layer_norm" | "rms_norm"), use_qk_norm, attention_bias, use_mean_pooling,
// downsample_ratio, vision_feature_layer (each overrides config_json;
// defaults are transformers': InternViT-300M-448px), crop_to_patches (default
// true, as InternVLProcessor passes it), min_patches, max_patches, resample
// ("bicubic" | "bilinear"; a checkpoint folder's preprocessor_config.json sets
// these but crop_to_patches, and the mean/std), weight_prefix
// ("model."), dtype, precision (CUDA: "bf16" | "fp8_linear", the encoder
// layers; docs/precision.md), max_budget_tiles (32), seed, check_finite, tune_gemm,
// tuning_cache. Weights: a .safetensors file, a checkpoint folder or index
// json, or "random".
#include "internvl_batch.hpp"
#include "internvl_config.hpp"
#include "internvl_cuda_model.hpp"
#include "internvl_tiling.hpp"
#include "internvl_weights.hpp"

#include <encoder_kit/model_backend.hpp>

#include <encgraph/sdk/sdk.hpp>

#include <string>
#include <vector>

namespace {

namespace sdk = encgraph::sdk;

// Where the encoder runs: the CPU forward over f32 weights, or the CUDA model in
// a build with the kernels (encoder_kit/model_backend.hpp).
using Backend =
    encoder_kit::ModelBackend<internvl::Options, encoder_kit::CudaIfBuilt<internvl::CudaModel>>;

class InternVL {
 public:
  static constexpr sdk::Identity identity{
      "internvl", "1.0.0",
      "InternVL image encoder (InternViT tiles, pixel shuffle, projector; the LLM's image "
      "tokens)",
      EG_MODALITY_IMAGE, Backend::kDevices};
  // Items are made from the options alone (no shared state): the runtime may
  // make a batch's items on several threads (ABI 1.4).
  static constexpr bool concurrent_items = true;
  using Item = internvl::ItemData;

  explicit InternVL(sdk::CreateArgs& args)
      : opt_(internvl::parse_options(args.config, args.raw)),
        backend_(identity.name, opt_, load_note(opt_), args.weights().value_or(""), args.device(),
                 args.device_index(), internvl::capacity_for(opt_, budget_range().max_budget)) {
    const eg_dtype dtype = opt_.dtype == internvl::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    info_.path("default", "image tokens");
    info_.output("image_features", opt_.model.text_hidden_size, dtype, 0);
    info_.buffer("pixel_rows", dtype).buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST);
  }

  const sdk::ModelInfo& model_info() const { return info_; }

  sdk::BudgetRange budget_range() const {
    const int64_t t = opt_.model.rows_per_tile();
    return {t, t * opt_.max_budget_tiles};
  }

  Item item_create(const eg_item_desc& d) const {
    internvl::check_geometry(d);
    const int64_t tiles = internvl::tile_count(opt_, d.height, d.width);
    return internvl::make_item_data(
        opt_, tiles,
        d.pixels ? internvl::patch_rows_from_pixels(opt_, d.pixels, d.height, d.width, d.channels)
                 : internvl::synthetic_patch_rows(opt_, tiles, d.seed));
  }
  sdk::ItemSpec item_spec(const Item& it) const { return spec(it.tiles); }
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    internvl::check_geometry(d);
    return spec(internvl::tile_count(opt_, d.height, d.width));
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    const internvl::Capacity cap = internvl::capacity_for(opt_, s.token_budget);
    if (buffer == internvl::kPixelRows)
      return {cap.patch_rows(opt_.model), opt_.model.patch_cols()};
    return {cap.tiles + 1};
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t) const {
    return {internvl::capacity_for(opt_, s.token_budget).out_rows(opt_.model),
            opt_.model.text_hidden_size};
  }
  size_t workspace_size(const eg_graph_shape& s) const {
    return backend_.workspace_bytes(internvl::capacity_for(opt_, s.token_budget));
  }

  // Zero pixels keep every value finite; whole-tile offsets make the warm-up
  // do a full batch's work.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.leave(internvl::kPixelRows);
    const std::vector<int32_t> cu =
        internvl::full_cu_seqlens(opt_, internvl::capacity_for(opt_, s.token_budget));
    buffers.get<int32_t>(internvl::kCuSeqlens).append(cu.data(), static_cast<int64_t>(cu.size()));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    sdk::UntypedStaging pixels = buffers.untyped(internvl::kPixelRows);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(internvl::kCuSeqlens);
    const internvl::StagedRows rows = internvl::stage_batch(
        opt_, internvl::capacity_for(opt_, s.token_budget), batch, pixels.data(), cu.data());
    pixels.set_rows(rows.pixel_rows);
    cu.set_rows(rows.cu_entries);
  }

  void forward(const sdk::ForwardArgs& args) { run(args, opt_.tune_gemm); }
  void forward_eager(const sdk::ForwardArgs& args) { run(args, false); }

 private:
  // What the load log line says of the encoder.
  static std::string load_note(const internvl::Options& o) {
    const internvl::ModelConfig& c = o.model;
    return encoder_kit::describe_vit(c.layers_to_run(), c.num_hidden_layers, c.hidden_size,
                                     c.rows_per_tile(), "tile");
  }

  // Work (data-parallel balancing) is the tile count's encoder rows.
  sdk::ItemSpec spec(int64_t tiles) const {
    const int64_t rows = tiles * opt_.model.rows_per_tile();
    return {tiles * opt_.model.seq_per_tile(), rows, 1, {rows}};
  }

  void run(const sdk::ForwardArgs& args, bool tune) {
    backend_.forward(internvl::capacity_for(opt_, args.shape().token_budget), args.buffers(),
                     args.output_data(0), args.workspace(), args.workspace_size(), args.stream(),
                     tune);
  }

  internvl::Options opt_;
  Backend backend_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(InternVL)
