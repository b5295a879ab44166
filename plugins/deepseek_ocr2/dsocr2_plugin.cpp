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
// CUDA (dsocr2_cuda_model.hpp): pixels are staged as bf16, outputs are bf16,
// and postprocess_outputs assembles the rows with device copies on the
// runtime's stream.
#include "dsocr2_config.hpp"
#include "dsocr2_cpu_forward.hpp"
#include "dsocr2_layout.hpp"
#include "dsocr2_preprocess.hpp"
#include "dsocr2_weights.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/weights.hpp>

#include <encgraph/sdk/sdk.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#ifdef DSOCR2_HAVE_CUDA
#include "dsocr2_cuda_model.hpp"

#include <cuda_runtime.h>
#endif

namespace {

namespace sdk = encgraph::sdk;

class DeepseekOcr2 {
 public:
  static constexpr sdk::Identity identity{
      "deepseek_ocr2", "0.1.0",
      "DeepSeek-OCR-2 vision side (SAM ViT-B + Qwen2 encoder), global and local paths",
      EG_MODALITY_IMAGE,
#ifdef DSOCR2_HAVE_CUDA
      EG_DEVICE_CPU | EG_DEVICE_CUDA
#else
      EG_DEVICE_CPU
#endif
  };
  using Item = dsocr2::ItemData;

  explicit DeepseekOcr2(sdk::CreateArgs& args) {
#ifndef DSOCR2_HAVE_CUDA
    if (args.device() == EG_DEVICE_CUDA)
      sdk::fail(EG_ERR_UNSUPPORTED,
                "deepseek_ocr2 was built without its CUDA kernels; use device = \"cpu\"");
#endif
    if (args.device() != EG_DEVICE_CPU && args.device() != EG_DEVICE_CUDA)
      sdk::fail(EG_ERR_UNSUPPORTED, "deepseek_ocr2: unknown device " +
                                        std::to_string(args.device()) + "; use cpu or cuda");
    opt_ = dsocr2::parse_options(args.config, args.raw);
    const dsocr2::ModelConfig& c = opt_.model;
    const encoder_kit::WeightSource source(args.weights().value_or("random"), opt_.seed,
                                           opt_.check_finite);
    dsocr2::Weights w = encoder_kit::naming_config_on_failure(
        opt_.config_path, [&] { return dsocr2::load_weights(c, source); });
    sdk::host().info("loaded " + source.description() +
                     (source.is_random() ? std::string() : " (" + w.layout + ")") + " (SAM " +
                     std::to_string(c.sam_layers) + "x" + std::to_string(c.sam_hidden_size) +
                     ", encoder " + std::to_string(c.encoder_layers) + "x" +
                     std::to_string(c.encoder_hidden()) + ", out " +
                     std::to_string(c.text_hidden_size) + ")");
    if (args.device() == EG_DEVICE_CPU) {
      cpu_ = std::make_unique<dsocr2::CpuModel>(c, std::move(w));
    } else {
#ifdef DSOCR2_HAVE_CUDA
      cuda_ = std::make_unique<dsocr2::CudaModel>(
          c, w, args.device_index(), opt_.max_budget,
          opt_.tune_gemm ? opt_.tuning_cache : std::string("off"),
          [](const std::string& message) { sdk::host().warn(message); });
#endif
    }
    const eg_dtype dtype = opt_.dtype == dsocr2::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    // Declared in dsocr2::Path / dsocr2::Buffer order.
    info_.path("global", "query tokens", {c.global_tokens(), false})
        .path("local", "query tokens", {c.local_tokens(), true})
        .output("image_features", c.text_hidden_size, dtype)
        .buffer("pixels", dtype)
        .buffer("view_count", EG_DTYPE_I32);
  }

  const sdk::ModelInfo& model_info() const {
    return info_;
  }
  sdk::BudgetRange budget_range() const {
    return {opt_.min_budget, opt_.max_budget};
  }

  Item item_create(const eg_item_desc& d) const {
    const dsocr2::ModelConfig& m = opt_.model;
    check_desc(d);
    Item item;
    item.views = d.pixels ? dsocr2::preprocess(m, d.pixels, d.height, d.width, d.channels)
                          : dsocr2::synthetic_views(m, d.height, d.width, d.seed);
    if (opt_.dtype == dsocr2::Dtype::BF16) item.to_bf16();
    return item;
  }
  sdk::ItemSpec item_spec(const Item& item) const {
    return spec_of(item.views.num_crops);
  }
  // 1.2: the spec before any pixels exist: the crop grid from the geometry alone.
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    check_desc(d);
    return spec_of(dsocr2::crop_grid(opt_.model, d.height, d.width).count());
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    const dsocr2::ModelConfig& m = opt_.model;
    const int64_t views = dsocr2::view_capacity(m, s.path, s.token_budget);
    const int64_t side = dsocr2::view_side(m, s.path);
    if (buffer == dsocr2::kPixels) return {views, 3 * side * side};
    return {1};  // kViewCount
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t) const {
    dsocr2::view_capacity(opt_.model, s.path, s.token_budget);  // checks the path
    return {s.token_budget, opt_.model.text_hidden_size};
  }
  size_t workspace_size(const eg_graph_shape& s) const {
#ifdef DSOCR2_HAVE_CUDA
    if (cuda_) {
      const dsocr2::ModelConfig& m = opt_.model;
      return cuda_->workspace_bytes(dsocr2::view_side(m, s.path),
                                    dsocr2::view_capacity(m, s.path, s.token_budget));
    }
#endif
    (void)s;
    return 0;  // the CPU forward keeps its own scratch
  }

  // Warm-up values: zero views (finite), all of the graph's capacity used.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    buffers.leave(dsocr2::kPixels);
    const int64_t capacity = dsocr2::view_capacity(opt_.model, s.path, s.token_budget);
    buffers.get<int32_t>(dsocr2::kViewCount).push(static_cast<int32_t>(capacity));
  }

  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    const dsocr2::ModelConfig& m = opt_.model;
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    // stage_views fills at most the graph's view capacity, the rows buffer_shape gave.
    sdk::UntypedStaging pixels = buffers.untyped(dsocr2::kPixels);
    const int64_t capacity = dsocr2::view_capacity(m, s.path, s.token_budget);
    if (pixels.rows() < capacity)
      sdk::fail(EG_ERR_INTERNAL, "deepseek_ocr2: pixel staging holds " +
                                     std::to_string(pixels.rows()) + " views, not " +
                                     std::to_string(capacity));
    const int64_t views = dsocr2::stage_views(m, s.path, batch, pixels.data(), capacity,
                                              opt_.dtype == dsocr2::Dtype::BF16);
    pixels.set_rows(views);
    buffers.get<int32_t>(dsocr2::kViewCount).push(static_cast<int32_t>(views));
  }

  // The graph path's warm-up times the CUDA products' algorithms for its
  // size; eager runs (a new size each time) do not.
  void forward(const sdk::ForwardArgs& args) {
    run(args, opt_.tune_gemm);
  }
  void forward_eager(const sdk::ForwardArgs& args) {
    run(args, false);
  }

  // Every image's rows: its crops (from the local path's output, crop order),
  // its global view, then view_separator; items in batch order on both paths.
  void postprocess_outputs(const sdk::PostprocessArgs<Item>& args) {
    const dsocr2::ModelConfig& m = opt_.model;
    const int64_t H = m.text_hidden_size;
    bool crops = false;
    for (const Item& it : args.items()) crops = crops || it.views.num_crops > 0;
    if (!args.path_used(dsocr2::kGlobal) || (crops && !args.path_used(dsocr2::kLocal)))
      sdk::invalid("deepseek_ocr2: a path this batch uses has no output");
#ifdef DSOCR2_HAVE_CUDA
    if (cuda_) {
      // Device rows (bf16), copied on the runtime's stream in the same order.
      const uint16_t* global = args.output<uint16_t>(dsocr2::kGlobal, 0).data();
      const uint16_t* local = crops ? args.output<uint16_t>(dsocr2::kLocal, 0).data() : nullptr;
      auto s = static_cast<cudaStream_t>(args.stream());
      const size_t row = static_cast<size_t>(H) * 2;
      auto copy = [&](void* dst, const void* src, int64_t rows) {
        const cudaError_t e =
            cudaMemcpyAsync(dst, src, static_cast<size_t>(rows) * row, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
          sdk::fail(EG_ERR_DEVICE, std::string("deepseek_ocr2 CUDA: copying output rows: ") +
                                       cudaGetErrorString(e));
      };
      int64_t crop = 0;
      for (int64_t k = 0; k < args.num_items(); ++k) {
        const Item& it = args.items()[k];
        uint16_t* out = args.result<uint16_t>(0, k).data();
        const int64_t local_rows = it.views.num_crops * m.local_tokens();
        if (local_rows > 0) copy(out, local + crop * m.local_tokens() * H, local_rows);
        copy(out + local_rows * H, global + k * m.global_tokens() * H, m.global_tokens());
        copy(out + (local_rows + m.global_tokens()) * H, cuda_->view_separator(), 1);
        crop += it.views.num_crops;
      }
      return;
    }
#endif
    const float* global = args.output<float>(dsocr2::kGlobal, 0).data();
    const float* local = crops ? args.output<float>(dsocr2::kLocal, 0).data() : nullptr;
    int64_t crop = 0;
    for (int64_t k = 0; k < args.num_items(); ++k) {
      const Item& it = args.items()[k];
      dsocr2::assemble_item(m, it, local ? local + crop * m.local_tokens() * H : nullptr,
                            global + k * m.global_tokens() * H,
                            cpu_->weights().view_separator.data(), args.result<float>(0, k).data());
      crop += it.views.num_crops;
    }
  }

 private:
  // Every check item_create makes on a description's geometry (item_create and
  // item_spec_for_desc both call it, so they fail alike).
  static void check_desc(const eg_item_desc& d) {
    if (d.modality != EG_MODALITY_IMAGE)
      sdk::invalid("deepseek_ocr2: items are images only (got modality " +
                   std::to_string(d.modality) + ")");
    if (d.frames != 1)
      sdk::invalid("deepseek_ocr2: an image has exactly one frame, got " +
                   std::to_string(d.frames));
    if (d.height <= 0 || d.width <= 0 || d.height > dsocr2::kMaxSide || d.width > dsocr2::kMaxSide)
      sdk::invalid("deepseek_ocr2: image of " + std::to_string(d.height) + "x" +
                   std::to_string(d.width) + " has a side outside [1, " +
                   std::to_string(dsocr2::kMaxSide) + "] pixels");
  }

  // The spec of an image with `crops` local crops.
  sdk::ItemSpec spec_of(int64_t crops) const {
    const dsocr2::ModelConfig& m = opt_.model;
    Item it;
    it.views.num_crops = crops;
    sdk::ItemSpec spec{1 + crops, it.output_rows(m), 1, {}};  // input: views through the SAM
    spec.path_tokens[dsocr2::kGlobal] = it.path_tokens(m, dsocr2::kGlobal);
    spec.path_tokens[dsocr2::kLocal] = it.path_tokens(m, dsocr2::kLocal);
    return spec;
  }

  void run(const sdk::ForwardArgs& args, bool tune) {
    const dsocr2::ModelConfig& m = opt_.model;
    const int32_t path = args.path();
    const int64_t capacity = dsocr2::view_capacity(m, path, args.shape().token_budget);
#ifdef DSOCR2_HAVE_CUDA
    if (cuda_) {
      // The view count stays on the device: kernels skip padded views there.
      cuda_->forward(dsocr2::view_side(m, path), capacity, args.buffers()[dsocr2::kPixels].data,
                     static_cast<const int32_t*>(args.buffers()[dsocr2::kViewCount].data),
                     args.output_data(0), args.workspace(), args.workspace_size(), args.stream(),
                     tune);
      return;
    }
#endif
    (void)tune;
    const int32_t views = args.buffer<int32_t>(dsocr2::kViewCount).at(0);
    if (views < 0 || views > capacity)
      sdk::invalid("deepseek_ocr2: view_count " + std::to_string(views) +
                   " is outside the graph's [0, " + std::to_string(capacity) + "]");
    cpu_->encode(args.buffer<float>(dsocr2::kPixels).data(), views, dsocr2::view_side(m, path),
                 args.output<float>(0).data());
  }

  dsocr2::Options opt_;
  std::unique_ptr<dsocr2::CpuModel> cpu_;  // CPU instances
#ifdef DSOCR2_HAVE_CUDA
  std::unique_ptr<dsocr2::CudaModel> cuda_;  // CUDA instances
#endif
  sdk::ModelInfo info_;
};

}  // namespace

ENCGRAPH_SDK_PLUGIN(DeepseekOcr2)
