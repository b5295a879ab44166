// The SigLIP vision tower (transformers' SiglipVisionModel) as an encgraph
// plugin ("siglip"), one model class on the plugin SDK (docs/sdk.md).
//
// Items are images, resized to image_size x image_size, so every image has the
// same (image_size / patch_size)^2 tokens. A batch is its items one after the
// other, selected by their index in the batch; budgets count the primary
// output's rows (the path unit): "patch tokens" by default, so the budget range
// is [tokens_per_image, tokens_per_image * max_budget_images] and the runtime's
// powers of two from its minimum are whole numbers of images; with "pooled"
// first each image yields one row and budgets count "images".
//
// Outputs (ABI 1.1 named outputs): `output = "last_hidden_state" | "pooled"`
// declares one; `outputs = ["last_hidden_state", "pooled"]` declares several,
// written by one forward (the pooling head reads the last hidden state), the
// first one primary. Capture inputs are host-staged (prepare_capture_staging):
// the plugin holds no device copies.
//
// Graph buffers (siglip_batch.hpp): patch rows [budget, patch_cols] (zero
// padding) and the images' row offsets cu_seqlens (repeat-last padding: padded
// entries are empty sequences). Padded rows sit outside every attention
// sequence and every other operation works row by row, so they cannot reach a
// real row; the pooling head writes zeros for empty sequences.
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json; its vision_config), hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, image_size, patch_size,
// num_channels, layer_norm_eps (each overrides config_json; defaults are
// SiglipVisionConfig's: base-patch16-224), output ("last_hidden_state" |
// "pooled") or outputs (a list of them), feature_layer (hidden_states index
// as transformers numbers them, e.g. -2; no post_layernorm), weight_prefix
// ("vision_model."; e.g. "vision_tower.vision_model." inside a VLM
// checkpoint), dtype (f32 on the CPU, bf16 on CUDA), max_budget_images (64),
// resample ("bicubic" | "bilinear"), precision (CUDA: "bf16" | "fp8_linear",
// the layers' products in FP8; encoder_kit/config.hpp), seed, check_finite (default true:
// NaN/Inf weights are an error), tune_gemm (CUDA: time the products'
// algorithms in each graph's warm-up; default true), tuning_cache (where those
// choices persist: a folder, "off", or unset for the default). Size keys are bounded (see
// VisionConfig::validate). Weights: a .safetensors file, a checkpoint
// directory or index json (sharded), or "random".
#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_cuda_model.hpp"
#include "siglip_weights.hpp"

#include <encoder_kit/model_backend.hpp>

#include <encgraph/sdk/sdk.hpp>

#include <string>
#include <vector>

namespace {

namespace sdk = encgraph::sdk;

// Where the tower runs: the CPU forward over f32 weights, or the CUDA model in
// a build with the kernels (encoder_kit/model_backend.hpp).
using Backend =
    encoder_kit::ModelBackend<siglip::Options, encoder_kit::CudaIfBuilt<siglip::CudaModel>>;

class Siglip {
 public:
  static constexpr sdk::Identity identity{
      "siglip", "1.1.0",
      "SigLIP vision tower (fixed resolution; last hidden state or a feature layer, and/or "
      "pooled)",
      EG_MODALITY_IMAGE, Backend::kDevices};
  // Items are made from the options alone (no shared state): the runtime may
  // make a batch's items on several threads (ABI 1.4).
  static constexpr bool concurrent_items = true;
  using Item = siglip::ItemData;

  explicit Siglip(sdk::CreateArgs& args)
      : opt_(siglip::parse_options(args.config, args.raw)),
        backend_(identity.name, opt_, load_note(opt_), args.weights().value_or(""), args.device(),
                 args.device_index(), capacity(budget_range().max_budget)) {
    const eg_dtype dtype = opt_.dtype == siglip::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    info_.path("default", opt_.pooled() ? "images" : "patch tokens");
    // The primary output's rows are the item's output_tokens (rows_per_item
    // 0); every other output has a fixed row count per image.
    for (size_t k = 0; k < opt_.outputs.size(); ++k)
      info_.output(siglip::output_name(opt_.outputs[k]), opt_.model.hidden_size, dtype,
                   k == 0 ? 0 : opt_.rows_of(opt_.outputs[k]));
    info_.buffer("pixel_rows", dtype).buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST);
  }

  const sdk::ModelInfo& model_info() const { return info_; }

  // Budgets count result rows (see the header comment).
  sdk::BudgetRange budget_range() const {
    const int64_t n = opt_.max_budget_images;
    if (!opt_.pooled()) return {opt_.model.tokens_per_image(), opt_.model.tokens_per_image() * n};
    // Budgets count images, and the runtime infers max_items_per_batch as
    // min(max / min, min): a minimum near sqrt(n) gives the largest batches.
    // Set budgets.token_budgets and max_items_per_batch for full-size batches.
    int64_t lo = 1;
    while ((lo * 2) * (lo * 2) <= n) lo *= 2;
    return {lo, n};
  }

  Item item_create(const eg_item_desc& d) const {
    siglip::check_geometry(d);
    // The channel count matters only for pixels (checked while reading them).
    return siglip::make_item_data(
        opt_, d.pixels
                  ? siglip::patch_rows_from_pixels(opt_, d.pixels, d.height, d.width, d.channels)
                  : siglip::synthetic_patch_rows(opt_, d.seed));
  }
  sdk::ItemSpec item_spec(const Item&) const { return image_spec(); }
  // 1.2: the spec before any pixels exist (data-parallel balancing).
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    siglip::check_geometry(d);
    return image_spec();
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    const siglip::Capacity cap = capacity(s.token_budget);
    if (buffer == siglip::kPixelRows) return {cap.rows, opt_.model.patch_cols()};
    return {cap.images + 1};  // kCuSeqlens
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t output) const {
    const siglip::Output o = opt_.outputs[static_cast<size_t>(output)];
    return {capacity(s.token_budget).rows_of(o), opt_.model.hidden_size};
  }
  size_t workspace_size(const eg_graph_shape& s) const {
    return backend_.workspace_bytes(capacity(s.token_budget));
  }

  // Zero pixels (left unwritten: the runtime zeroes them) keep every value
  // finite; the offsets make the warm-up do a full batch's work.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.leave(siglip::kPixelRows);
    const std::vector<int32_t> cu = siglip::capture_cu_seqlens(opt_, capacity(s.token_budget));
    buffers.get<int32_t>(siglip::kCuSeqlens).append(cu.data(), static_cast<int64_t>(cu.size()));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    sdk::UntypedStaging pixels = buffers.untyped(siglip::kPixelRows);
    sdk::Staging<int32_t> cu = buffers.get<int32_t>(siglip::kCuSeqlens);
    const siglip::StagedRows rows =
        siglip::stage_batch(opt_, capacity(s.token_budget), batch, pixels.data(), cu.data());
    pixels.set_rows(rows.pixel_rows);
    cu.set_rows(rows.cu_entries);
  }

  // The graph path's warm-up times the matrix products' algorithms for its
  // size (once a size); eager runs of exact sizes keep the heuristic's pick.
  void forward(const sdk::ForwardArgs& args) { run(args, opt_.tune_gemm); }
  void forward_eager(const sdk::ForwardArgs& args) { run(args, false); }

 private:
  // What the load log line says of the tower.
  static std::string load_note(const siglip::Options& o) {
    return encoder_kit::describe_vit(o.layers_to_run(), o.model.num_hidden_layers,
                                     o.model.hidden_size, o.model.tokens_per_image(), "image");
  }

  siglip::Capacity capacity(int64_t token_budget) const {
    eg_graph_shape shape{};
    shape.token_budget = token_budget;
    return siglip::capacity_for(opt_, shape);
  }

  // Every image is resized to the model's square: one spec for all, whose
  // path unit is patch tokens or images. Every image costs the same, so
  // input_size (data-parallel work) stays the patch count: a FLOP count
  // (encoder_kit/work_estimate.hpp) would only scale every item alike.
  sdk::ItemSpec image_spec() const {
    const int64_t rows = opt_.rows_per_image();
    return {opt_.model.tokens_per_image(), rows, 1, {rows}};
  }

  void run(const sdk::ForwardArgs& args, bool tune) {
    siglip::OutputPtrs outputs;
    for (size_t k = 0; k < opt_.outputs.size(); ++k)
      (opt_.outputs[k] == siglip::Output::Pooled ? outputs.pooled : outputs.last_hidden_state) =
          args.output_data(static_cast<int32_t>(k));
    backend_.forward(capacity(args.shape().token_budget), args.buffers(), outputs, args.workspace(),
                     args.workspace_size(), args.stream(), tune);
  }

  siglip::Options opt_;  // first: the backend and the description are made from it
  Backend backend_;
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(Siglip)
