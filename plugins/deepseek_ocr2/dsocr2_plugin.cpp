// DeepSeek-OCR-2's vision side behind the encgraph plugin ABI ("deepseek_ocr2"):
// transformers' DeepseekOcr2Model.get_image_features (docs/models/deepseek_ocr2.md).
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

#include <encoder_kit/abi_guard.hpp>
#include <encoder_kit/checked.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/plugin_abi.hpp>

#include <encgraph/plugin_api.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifdef DSOCR2_HAVE_CUDA
#include "dsocr2_cuda_model.hpp"

#include <cuda_runtime.h>
#endif

namespace {

using encoder_kit::fail;
using encoder_kit::guarded;
using encoder_kit::tensor_bytes;

const eg_host_api* g_host = nullptr;
constexpr const char* kName = "deepseek_ocr2";

struct Instance {
  dsocr2::Options opt;
  eg_model_info info{};
  std::unique_ptr<dsocr2::CpuModel> cpu;  // CPU instances
#ifdef DSOCR2_HAVE_CUDA
  std::unique_ptr<dsocr2::CudaModel> cuda;  // CUDA instances
#endif
};

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}
const dsocr2::ItemData& item_of(const eg_item* i) {
  return *reinterpret_cast<const dsocr2::ItemData*>(i);
}

void log(eg_log_level level, const std::string& message) {
  encoder_kit::log_to_host(g_host, level, kName, message);
}

// ---------------------------------------------------------------- lifetime

eg_status ds_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
  return guarded(err, [&] {
#ifndef DSOCR2_HAVE_CUDA
    if (p->device == EG_DEVICE_CUDA)
      fail(EG_ERR_UNSUPPORTED,
           "deepseek_ocr2 was built without its CUDA kernels; use device = \"cpu\"");
#endif
    if (p->device != EG_DEVICE_CPU && p->device != EG_DEVICE_CUDA)
      fail(EG_ERR_UNSUPPORTED,
           "deepseek_ocr2: unknown device " + std::to_string(p->device) + "; use cpu or cuda");
    auto in = std::make_unique<Instance>();
    in->opt = dsocr2::parse_options(p);
    const dsocr2::ModelConfig& c = in->opt.model;
    const std::string weights = p->weights ? p->weights : "random";
    const encoder_kit::WeightSource source(weights, in->opt.seed, in->opt.check_finite);
    dsocr2::Weights w = encoder_kit::naming_config_on_failure(
        in->opt.config_path, [&] { return dsocr2::load_weights(c, source); });
    log(EG_LOG_INFO, "loaded " + source.description() +
                         (source.is_random() ? std::string() : " (" + w.layout + ")") + " (SAM " +
                         std::to_string(c.sam_layers) + "x" + std::to_string(c.sam_hidden_size) +
                         ", encoder " + std::to_string(c.encoder_layers) + "x" +
                         std::to_string(c.encoder_hidden()) + ", out " +
                         std::to_string(c.text_hidden_size) + ")");
    if (p->device == EG_DEVICE_CPU) {
      in->cpu = std::make_unique<dsocr2::CpuModel>(c, std::move(w));
    } else {
#ifdef DSOCR2_HAVE_CUDA
      in->cuda = std::make_unique<dsocr2::CudaModel>(
          c, w, p->device_index, in->opt.max_budget,
          in->opt.tune_gemm ? in->opt.tuning_cache : std::string("off"),
          [](const std::string& message) { log(EG_LOG_WARN, message); });
#endif
    }
    const int32_t dtype = in->opt.dtype == dsocr2::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = c.text_hidden_size;
    mi.out_dtype = dtype;
    mi.max_frames_per_video = 0;
    mi.num_paths = dsocr2::kNumPaths;
    mi.paths[dsocr2::kGlobal] = {"global", c.global_tokens(), 0, 0};
    mi.paths[dsocr2::kLocal] = {"local", c.local_tokens(), 1, 0};
    mi.path_units[dsocr2::kGlobal] = "query tokens";
    mi.path_units[dsocr2::kLocal] = "query tokens";
    mi.num_outputs = 1;
    mi.outputs[0] = {"image_features", c.text_hidden_size, dtype, 0, 0};
    mi.num_buffers = dsocr2::kNumBuffers;
    mi.buffers[dsocr2::kPixels] = {"pixels", dtype, EG_PAD_ZERO};
    mi.buffers[dsocr2::kViewCount] = {"view_count", EG_DTYPE_I32, EG_PAD_ZERO};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void ds_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status ds_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] { encoder_kit::write_model_info(self(i).info, out); });
}

eg_status ds_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] {
    *lo = self(i).opt.min_budget;
    *hi = self(i).opt.max_budget;
  });
}

// ---------------------------------------------------------------- items

// Every check item_create makes on a description's geometry (item_create and
// item_spec_for_desc both call it, so they fail alike).
void check_desc(const eg_item_desc* d) {
  if (d->modality != EG_MODALITY_IMAGE)
    fail(EG_ERR_INVALID_ARGUMENT,
         "deepseek_ocr2: items are images only (got modality " + std::to_string(d->modality) + ")");
  if (d->frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "deepseek_ocr2: an image has exactly one frame, got " + std::to_string(d->frames));
  if (d->height <= 0 || d->width <= 0 || d->height > dsocr2::kMaxSide ||
      d->width > dsocr2::kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: image of " + std::to_string(d->height) + "x" +
                                      std::to_string(d->width) + " has a side outside [1, " +
                                      std::to_string(dsocr2::kMaxSide) + "] pixels");
}

// The spec of an image with `crops` local crops.
eg_item_spec spec_of(const dsocr2::ModelConfig& m, int64_t crops) {
  dsocr2::ItemData it;
  it.views.num_crops = crops;
  eg_item_spec spec{};
  spec.input_size = 1 + crops;  // views through the SAM
  spec.output_tokens = it.output_rows(m);
  spec.frames = 1;
  spec.path_tokens[dsocr2::kGlobal] = it.path_tokens(m, dsocr2::kGlobal);
  spec.path_tokens[dsocr2::kLocal] = it.path_tokens(m, dsocr2::kLocal);
  return spec;
}

eg_status ds_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    const dsocr2::ModelConfig& m = self(i).opt.model;
    check_desc(d);
    auto item = std::make_unique<dsocr2::ItemData>();
    item->views = d->pixels ? dsocr2::preprocess(m, d->pixels, d->height, d->width, d->channels)
                            : dsocr2::synthetic_views(m, d->height, d->width, d->seed);
    if (self(i).opt.dtype == dsocr2::Dtype::BF16) item->to_bf16();
    *out = reinterpret_cast<eg_item*>(item.release());
  });
}

void ds_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<dsocr2::ItemData*>(item);
}

eg_status ds_item_spec(eg_instance* i, const eg_item* item, eg_item_spec* out, eg_error* err) {
  return guarded(err, [&] {
    encoder_kit::write_item_spec(g_host, spec_of(self(i).opt.model, item_of(item).views.num_crops),
                                 out);
  });
}

// 1.2: the spec before any pixels exist: the crop grid from the geometry alone.
eg_status ds_item_spec_for_desc(eg_instance* i, const eg_item_desc* d, eg_item_spec* out,
                                eg_error* err) {
  return guarded(err, [&] {
    const dsocr2::ModelConfig& m = self(i).opt.model;
    check_desc(d);
    encoder_kit::write_item_spec(
        g_host, spec_of(m, dsocr2::crop_grid(m, d->height, d->width).count()), out);
  });
}

// ---------------------------------------------------------------- graph geometry

eg_status ds_buffer_shape(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                          eg_error* err) {
  return guarded(err, [&] {
    const dsocr2::ModelConfig& m = self(i).opt.model;
    const int64_t views = dsocr2::view_capacity(m, s->path, s->token_budget);
    const int64_t side = dsocr2::view_side(m, s->path);
    *out = eg_tensor{};
    out->ndim = index == dsocr2::kPixels ? 2 : 1;
    switch (index) {
      case dsocr2::kPixels:
        out->shape[0] = views;
        out->shape[1] = 3 * side * side;
        break;
      case dsocr2::kViewCount: out->shape[0] = 1; break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: no buffer " + std::to_string(index));
    }
  });
}

eg_status ds_output_shape_at(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                             eg_error* err) {
  return guarded(err, [&] {
    const dsocr2::ModelConfig& m = self(i).opt.model;
    if (index != 0)
      fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: no output " + std::to_string(index));
    dsocr2::view_capacity(m, s->path, s->token_budget);  // checks the path
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = s->token_budget;
    out->shape[1] = m.text_hidden_size;
  });
}

eg_status ds_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out, eg_error* err) {
  return ds_output_shape_at(i, s, 0, out, err);
}

eg_status ds_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes, eg_error* err) {
  return guarded(err, [&] {
    *bytes = 0;  // the CPU forward keeps its own scratch
#ifdef DSOCR2_HAVE_CUDA
    const Instance& in = self(i);
    if (in.cuda) {
      const dsocr2::ModelConfig& m = in.opt.model;
      *bytes = in.cuda->workspace_bytes(dsocr2::view_side(m, s->path),
                                        dsocr2::view_capacity(m, s->path, s->token_budget));
    }
#else
    (void)i;
    (void)s;
#endif
  });
}

// ---------------------------------------------------------------- buffer values

void check_buffer_count(int32_t nb) {
  if (nb != dsocr2::kNumBuffers)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: expected " + std::to_string(dsocr2::kNumBuffers) +
                                      " buffers, got " + std::to_string(nb));
}

void put_count(eg_replay_buffer& b, int64_t views) {
  if (tensor_bytes(b.staging) < sizeof(int32_t))
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: view_count staging is smaller than one int32");
  const int32_t v = static_cast<int32_t>(views);
  std::memcpy(b.staging.data, &v, sizeof(v));
  b.rows = 1;
}

// Warm-up values: zero views (finite), all of the graph's capacity used.
eg_status ds_prepare_capture_staging(eg_instance* i, const eg_graph_shape* s,
                                     eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    check_buffer_count(nb);
    bufs[dsocr2::kPixels].rows = -1;
    put_count(bufs[dsocr2::kViewCount],
              dsocr2::view_capacity(self(i).opt.model, s->path, s->token_budget));
  });
}

eg_status ds_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                    const eg_item* const* items, int64_t n, eg_replay_buffer* bufs,
                                    int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const dsocr2::ModelConfig& m = self(i).opt.model;
    check_buffer_count(nb);
    const int64_t capacity = dsocr2::view_capacity(m, s->path, s->token_budget);
    const int64_t side = dsocr2::view_side(m, s->path);
    const bool bf16 = self(i).opt.dtype == dsocr2::Dtype::BF16;
    if (tensor_bytes(bufs[dsocr2::kPixels].staging) <
        static_cast<size_t>(capacity * 3 * side * side) * (bf16 ? 2 : sizeof(float)))
      fail(EG_ERR_INVALID_ARGUMENT,
           "deepseek_ocr2: pixel staging is smaller than buffer_shape gave");
    std::vector<const dsocr2::ItemData*> batch;
    for (int64_t k = 0; k < n; ++k) batch.push_back(&item_of(items[k]));
    const int64_t views =
        dsocr2::stage_views(m, s->path, batch, bufs[dsocr2::kPixels].staging.data, capacity, bf16);
    bufs[dsocr2::kPixels].rows = views;
    put_count(bufs[dsocr2::kViewCount], views);
  });
}

// ---------------------------------------------------------------- forward

// `tune`: the graph path's warm-up times the CUDA products' algorithms for
// its size; eager runs (a new size each time) do not.
void run_forward(Instance& in, const eg_forward_args* a, bool tune) {
  const dsocr2::ModelConfig& m = in.opt.model;
  check_buffer_count(a->num_buffers);
  const int32_t path = a->shape.path;
  const int64_t capacity = dsocr2::view_capacity(m, path, a->shape.token_budget);
#ifdef DSOCR2_HAVE_CUDA
  if (in.cuda) {
    // The view count stays on the device: kernels skip padded views there.
    in.cuda->forward(dsocr2::view_side(m, path), capacity, a->buffers[dsocr2::kPixels].data,
                     static_cast<const int32_t*>(a->buffers[dsocr2::kViewCount].data),
                     encoder_kit::forward_output(*a, 0, kName), a->workspace, a->workspace_size,
                     a->stream, tune);
    return;
  }
#endif
  (void)tune;
  int32_t views = 0;
  std::memcpy(&views, a->buffers[dsocr2::kViewCount].data, sizeof(views));
  if (views < 0 || views > capacity)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: view_count " + std::to_string(views) +
                                      " is outside the graph's [0, " + std::to_string(capacity) +
                                      "]");
  in.cpu->encode(static_cast<const float*>(a->buffers[dsocr2::kPixels].data), views,
                 dsocr2::view_side(m, path),
                 static_cast<float*>(encoder_kit::forward_output(*a, 0, kName)));
}

eg_status ds_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/self(i).opt.tune_gemm); });
}

eg_status ds_forward_eager(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/false); });
}

// Every image's rows: its crops (from the local path's output, crop order),
// its global view, then view_separator; items in batch order on both paths.
eg_status ds_postprocess_outputs(eg_instance* i, const eg_tensor* outputs, int32_t num_paths,
                                 int32_t num_outputs, const eg_item* const* items,
                                 int64_t num_items, const eg_tensor* results, void* stream,
                                 eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const dsocr2::ModelConfig& m = in.opt.model;
    if (num_paths != dsocr2::kNumPaths || num_outputs != 1)
      fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: postprocess got " + std::to_string(num_paths) +
                                        " paths and " + std::to_string(num_outputs) +
                                        " outputs, expected 2 and 1");
    const int64_t H = m.text_hidden_size;
    for (int64_t k = 0; k < num_items; ++k)
      if (!outputs[dsocr2::kGlobal].data ||
          (item_of(items[k]).views.num_crops > 0 && !outputs[dsocr2::kLocal].data))
        fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: a path this batch uses has no output");
#ifdef DSOCR2_HAVE_CUDA
    if (in.cuda) {
      // Device rows (bf16), copied on the runtime's stream in the same order.
      auto s = static_cast<cudaStream_t>(stream);
      const auto* global = static_cast<const uint16_t*>(outputs[dsocr2::kGlobal].data);
      const auto* local = static_cast<const uint16_t*>(outputs[dsocr2::kLocal].data);
      const size_t row = static_cast<size_t>(H) * 2;
      int64_t crop = 0;
      auto copy = [&](void* dst, const void* src, int64_t rows) {
        const cudaError_t e =
            cudaMemcpyAsync(dst, src, static_cast<size_t>(rows) * row, cudaMemcpyDeviceToDevice, s);
        if (e != cudaSuccess)
          fail(EG_ERR_DEVICE,
               std::string("deepseek_ocr2 CUDA: copying output rows: ") + cudaGetErrorString(e));
      };
      for (int64_t k = 0; k < num_items; ++k) {
        const dsocr2::ItemData& it = item_of(items[k]);
        auto* out = static_cast<uint16_t*>(results[k].data);
        const int64_t local_rows = it.views.num_crops * m.local_tokens();
        if (local_rows > 0) copy(out, local + crop * m.local_tokens() * H, local_rows);
        copy(out + local_rows * H, global + k * m.global_tokens() * H, m.global_tokens());
        copy(out + (local_rows + m.global_tokens()) * H, in.cuda->view_separator(), 1);
        crop += it.views.num_crops;
      }
      return;
    }
#endif
    (void)stream;
    const float* global = static_cast<const float*>(outputs[dsocr2::kGlobal].data);
    const float* local = static_cast<const float*>(outputs[dsocr2::kLocal].data);
    int64_t crop = 0;
    for (int64_t k = 0; k < num_items; ++k) {
      const dsocr2::ItemData& it = item_of(items[k]);
      dsocr2::assemble_item(m, it, local ? local + crop * m.local_tokens() * H : nullptr,
                            global + k * m.global_tokens() * H,
                            in.cpu->weights().view_separator.data(),
                            static_cast<float*>(results[k].data));
      crop += it.views.num_crops;
    }
  });
}

eg_plugin_api make_api() {
  eg_plugin_api a{};  // zeroed: every optional entry not set below stays NULL
  a.abi_major = EG_ABI_VERSION_MAJOR;
  a.abi_minor = EG_ABI_VERSION_MINOR;
  a.struct_size = sizeof(eg_plugin_api);
  a.name = kName;
  a.version = "0.1.0";
  a.description = "DeepSeek-OCR-2 vision side (SAM ViT-B + Qwen2 encoder), global and local paths";
  a.modalities = EG_MODALITY_IMAGE;
#ifdef DSOCR2_HAVE_CUDA
  a.devices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
  a.devices = EG_DEVICE_CPU;
#endif
  a.create = ds_create;
  a.destroy = ds_destroy;
  a.model_info = ds_model_info;
  a.budget_range = ds_budget_range;
  a.item_create = ds_item_create;
  a.item_destroy = ds_item_destroy;
  a.item_spec = ds_item_spec;
  a.buffer_shape = ds_buffer_shape;
  a.output_shape = ds_output_shape;
  a.workspace_size = ds_workspace_size;
  a.prepare_replay_buffers = ds_prepare_replay_buffers;
  a.forward = ds_forward;
  a.forward_eager = ds_forward_eager;
  a.prepare_capture_staging = ds_prepare_capture_staging;
  a.output_shape_at = ds_output_shape_at;
  a.postprocess_outputs = ds_postprocess_outputs;
  a.item_spec_for_desc = ds_item_spec_for_desc;
  return a;
}

const eg_plugin_api kApi = make_api();

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  return encoder_kit::accept_host(host, g_host, kApi, /*min_minor=*/1);
}
