// LLaVA-OneVision's image and video encoder (transformers'
// LlavaOnevisionModel.get_image_features / get_video_features plus the video
// newline of its forward: SigLIP tower, multi_modal_projector, packing) as an
// encgraph plugin ("llava_onevision"), one model class on the plugin SDK.
//
// Items are images or videos. An image is tiled by the anyres processor
// (llava_tiling.hpp): its base tile, then the grid tiles of the best
// image_grid_pinpoints resolution; a video is one tile per frame. Every tile
// is one attention sequence of (image_size / patch_size)^2 tower rows (729).
// Budgets count tiles: [2, max_budget_tiles]. An item's output is what the
// language model receives, rows of text_hidden_size in transformers' order:
// for an image the base tile's rows, then the unpadded (and, above
// anyres_max_<n>, bilinearly shrunk) grid map row by row, each row followed
// by image_newline; for a video each frame's 2x2-pooled rows, then one
// image_newline.
//
// Graph buffers (llava_batch.hpp): patch rows (zero padding), the tiles'
// tower-row offsets cu_seqlens (repeat-last padding), and the packing plan
// pack_src / pack_weight (zero padding: padded output rows are zero).
//
// Config keys: config_json (the model's config.json: vision_config and the
// top-level vision_feature_layer, vision_feature_select_strategy,
// vision_aspect_ratio, image_grid_pinpoints, multimodal_projector_bias,
// text_config.hidden_size), hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, image_size, patch_size,
// text_hidden_size, layer_norm_eps, vision_feature_layer,
// multimodal_projector_bias, vision_aspect_ratio ("anyres_max_<n>"),
// image_grid_pinpoints (a flat [h, w, h, w, ...] list), resample ("bicubic" |
// "bilinear"; a checkpoint folder's preprocessor_config.json sets it, the
// pinpoints and the mean/std), weight_prefix ("auto"), dtype, precision (CUDA:
// "bf16" | "fp8_linear", the SigLIP tower's layers; docs/precision.md),
// max_budget_tiles (64), max_frames_per_video (32), seed, check_finite,
// tune_gemm, tuning_cache. Weights: a .safetensors file, a checkpoint folder
// or index json, or "random".
#include "llava_batch.hpp"
#include "llava_config.hpp"
#include "llava_cuda_model.hpp"
#include "llava_tiling.hpp"
#include "llava_weights.hpp"

#include <encoder_kit/model_backend.hpp>

#include <encgraph/sdk/sdk.hpp>

#include <string>
#include <vector>

namespace {

namespace sdk = encgraph::sdk;
namespace lo = llava_onevision;

// Where the encoder runs: the CPU forward over f32 weights, or the CUDA model in
// a build with the kernels (encoder_kit/model_backend.hpp).
using Backend = encoder_kit::ModelBackend<lo::Options, encoder_kit::CudaIfBuilt<lo::CudaModel>>;

class LlavaOnevision {
 public:
  static constexpr sdk::Identity identity{
      "llava_onevision", "1.0.0",
      "LLaVA-OneVision image and video encoder (SigLIP tiles, projector, anyres packing; the "
      "LLM's image tokens)",
      EG_MODALITY_IMAGE | EG_MODALITY_VIDEO, Backend::kDevices};
  // Items are made from the options alone (no shared state): the runtime may
  // make a batch's items on several threads (ABI 1.4).
  static constexpr bool concurrent_items = true;
  using Item = lo::ItemData;

  explicit LlavaOnevision(sdk::CreateArgs& args)
      : opt_(lo::parse_options(args.config, args.raw)),
        backend_(identity.name, opt_, load_note(opt_), args.weights().value_or(""), args.device(),
                 args.device_index(), lo::capacity_for(opt_, budget_range().max_budget)) {
    const eg_dtype dtype = opt_.dtype == lo::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    info_.path("default", "tiles");
    info_.output("image_features", opt_.model.text_hidden_size, dtype, 0);
    info_.max_frames_per_video(opt_.max_frames_per_video);
    info_.buffer("pixel_rows", dtype)
        .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)
        .buffer("pack_src", EG_DTYPE_I32)
        .buffer("pack_weight", EG_DTYPE_F32);
  }

  const sdk::ModelInfo& model_info() const { return info_; }

  // An image has at least two tiles (its base and one grid tile).
  sdk::BudgetRange budget_range() const { return {2, opt_.max_budget_tiles}; }

  Item item_create(const eg_item_desc& d) const {
    lo::check_geometry(opt_, d);
    lo::ItemShape shape = lo::item_shape(opt_, d);
    const int64_t tiles = shape.tiles;
    return lo::make_item_data(opt_, std::move(shape),
                              d.pixels ? lo::patch_rows_from_pixels(opt_, d)
                                       : lo::synthetic_patch_rows(opt_, tiles, d.seed));
  }
  sdk::ItemSpec item_spec(const Item& it) const {
    return spec(it.tiles, it.plan.rows(), it.frames);
  }
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    lo::check_geometry(opt_, d);
    const lo::ItemShape shape = lo::item_shape(opt_, d);
    return spec(shape.tiles, shape.plan.rows(), shape.frames);
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    const lo::Capacity cap = lo::capacity_for(opt_, s.token_budget);
    const lo::ModelConfig& c = opt_.model;
    switch (buffer) {
      case lo::kPixelRows: return {cap.tower_rows(c), c.vision.patch_cols()};
      case lo::kCuSeqlens: return {cap.tiles + 1};
      default: return {cap.out_rows(c), lo::kTaps};
    }
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t) const {
    return {lo::capacity_for(opt_, s.token_budget).out_rows(opt_.model),
            opt_.model.text_hidden_size};
  }
  size_t workspace_size(const eg_graph_shape& s) const {
    return backend_.workspace_bytes(lo::capacity_for(opt_, s.token_budget));
  }

  // Zero pixels keep every value finite; whole-tile offsets make the warm-up
  // do a full batch's work; a zero plan packs zero rows.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    for (int32_t b : {lo::kPixelRows, lo::kPackSrc, lo::kPackWeight}) buffers.leave(b);
    const std::vector<int32_t> cu =
        lo::full_cu_seqlens(opt_, lo::capacity_for(opt_, s.token_budget));
    buffers.get<int32_t>(lo::kCuSeqlens).append(cu.data(), static_cast<int64_t>(cu.size()));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    sdk::UntypedStaging pixels = buffers.untyped(lo::kPixelRows);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(lo::kCuSeqlens);
    sdk::Staging<int32_t> src = buffers.get<int32_t>(lo::kPackSrc);
    sdk::Staging<float> weight = buffers.get<float>(lo::kPackWeight);
    const lo::StagedRows rows =
        lo::stage_batch(opt_, lo::capacity_for(opt_, s.token_budget), batch, pixels.data(),
                        cu.data(), src.data(), weight.data());
    pixels.set_rows(rows.pixel_rows);
    cu.set_rows(rows.cu_entries);
    src.set_rows(rows.out_rows);
    weight.set_rows(rows.out_rows);
  }

  void forward(const sdk::ForwardArgs& args) { run(args, opt_.tune_gemm); }
  void forward_eager(const sdk::ForwardArgs& args) { run(args, false); }

 private:
  // What the load log line says of the encoder.
  static std::string load_note(const lo::Options& o) {
    const lo::ModelConfig& c = o.model;
    return "SigLIP tower of " + std::to_string(c.vision.num_hidden_layers) + " layers, hidden " +
           std::to_string(c.vision.hidden_size) + ", " + std::to_string(c.rows_per_tile()) +
           " rows per tile; projector to " + std::to_string(c.text_hidden_size);
  }

  // Work (data-parallel balancing) is the tower rows; budgets count tiles.
  sdk::ItemSpec spec(int64_t tiles, int64_t out_rows, int64_t frames) const {
    return {tiles * opt_.model.rows_per_tile(), out_rows, frames, {tiles}};
  }

  void run(const sdk::ForwardArgs& args, bool tune) {
    backend_.forward(lo::capacity_for(opt_, args.shape().token_budget), args.buffers(),
                     args.output_data(0), args.workspace(), args.workspace_size(), args.stream(),
                     tune);
  }

  lo::Options opt_;
  Backend backend_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(LlavaOnevision)
