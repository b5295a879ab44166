// The Qwen2.5-VL vision tower behind the encgraph plugin ABI ("qwen2_5_vl").
//
// Items are images (grid_thw = [1, h/14, w/14] after the processor's resize)
// and videos (grid_t = frames / 2); each yields grid_t * h * w / 4 output
// tokens of out_hidden_size. Budgets count output tokens (the path's unit,
// "merged tokens"); a graph of budget B holds 4B patch rows, and its frame
// tables are sized by the shape's max_frames_per_batch, which the runtime's
// packer keeps every batch within.
//
// Graph buffers (qwen_batch.hpp): pixel rows, rotary cos/sin per patch, the
// cumulative patch offsets of full-attention sequences (one per frame) and of
// attention windows (repeat-last padding keeps padded entries empty), and the
// inverse window permutation of the output tokens. Items are stored already in
// window order, so the forward needs only the inverse gather at its end. Padded
// patch rows are zero and sit outside every sequence: rows never mix outside
// attention, so padding cannot reach a real row.
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json; its vision_config), depth, hidden_size, num_heads,
// intermediate_size, out_hidden_size, patch_size, temporal_patch_size,
// spatial_merge_size, window_size, fullatt_block_indexes, in_channels (each
// overrides config_json), dtype (f32 on the CPU, bf16 on CUDA), min_pixels,
// max_pixels, min_budget, max_budget, max_frames_per_video, seed, tune_gemm
// (CUDA: time product algorithms while capturing; default true), tuning_cache
// (CUDA: the folder tuned choices persist in, or "off"; docs/config.md), mlp_kernel
// (CUDA: "auto", "fused_norm", "fused" or "cublaslt"; qwen_config.hpp), qkv_kernel
// (CUDA: "auto", "fused_norm" or "cublaslt"; qwen_config.hpp), check_finite
// (default true: NaN/Inf weights are an error). Size keys are bounded (see
// VisionConfig::validate). Weights: a .safetensors file, a checkpoint
// directory / index json, or "random". A checkpoint directory's config.json
// and preprocessor_config.json configure the tower (docs/config.md).
#include "qwen_batch.hpp"
#include "qwen_config.hpp"
#include "qwen_cpu_forward.hpp"
#include "qwen_layout.hpp"
#include "qwen_preprocess.hpp"
#include "qwen_weights.hpp"

#include <encoder_kit/abi_guard.hpp>
#include <encoder_kit/checked.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/plugin_abi.hpp>

#include <encgraph/plugin_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifdef QWEN_HAVE_CUDA
#include "qwen_cuda_model.hpp"
#endif

namespace {

using encoder_kit::fail;
using encoder_kit::guarded;
using encoder_kit::tensor_bytes;
using qwen::Buffer;

const eg_host_api* g_host = nullptr;

struct Instance {
  qwen::Options opt;
  int32_t device = EG_DEVICE_CPU;
  int32_t device_index = 0;
  eg_model_info info{};
  qwen::Weights cpu_weights;  // CPU instances
#ifdef QWEN_HAVE_CUDA
  std::unique_ptr<qwen::CudaModel> cuda;  // CUDA instances
#endif
};

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}
const qwen::ItemData& item_of(const eg_item* i) {
  return *reinterpret_cast<const qwen::ItemData*>(i);
}

void log(eg_log_level level, const std::string& message) {
  encoder_kit::log_to_host(g_host, level, "qwen2_5_vl", message);
}

// ---------------------------------------------------------------- lifetime

eg_status qwen_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
  return guarded(err, [&] {
    auto in = std::make_unique<Instance>();
    in->opt = qwen::parse_options(p);
    in->device = p->device;
    in->device_index = p->device_index;
    const qwen::VisionConfig& c = in->opt.model;
#ifndef QWEN_HAVE_CUDA
    if (in->device == EG_DEVICE_CUDA)
      fail(EG_ERR_UNSUPPORTED,
           "qwen2_5_vl was built without its CUDA kernels; use device = \"cpu\"");
#endif
    const std::string weights = p->weights ? p->weights : "random";
    const encoder_kit::WeightSource source(weights, in->opt.seed, in->opt.check_finite);
    log(EG_LOG_INFO, "loading " + source.description() + " (depth " + std::to_string(c.depth) +
                         ", hidden " + std::to_string(c.hidden_size) + ")");
    qwen::Weights w = encoder_kit::naming_config_on_failure(
        in->opt.config_path, [&] { return qwen::load_weights(c, source); });
    if (in->device == EG_DEVICE_CPU) {
      in->cpu_weights = std::move(w);
    } else {
#ifdef QWEN_HAVE_CUDA
      in->cuda = std::make_unique<qwen::CudaModel>(
          c, w, in->device_index, in->opt.max_budget * c.merge_unit(),
          in->opt.tune_gemm ? in->opt.tuning_cache : std::string("off"),
          [](const std::string& message) { log(EG_LOG_WARN, message); }, in->opt.mlp_kernel,
          in->opt.qkv_kernel);
#endif
    }
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = c.out_hidden_size;
    mi.out_dtype = in->opt.dtype == qwen::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    mi.max_frames_per_video = static_cast<int32_t>(in->opt.max_frames_per_video);
    mi.num_paths = 1;
    mi.paths[0] = {"default", 0, 0, 0};
    // Budgets and path_tokens count the tower's output rows: merged 2x2 units.
    mi.path_units[0] = "merged tokens";
    mi.num_buffers = qwen::kNumBuffers;
    mi.buffers[qwen::kPixelRows] = {"pixel_rows", mi.out_dtype, EG_PAD_ZERO};
    mi.buffers[qwen::kRopeCos] = {"rope_cos", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[qwen::kRopeSin] = {"rope_sin", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[qwen::kCuFrames] = {"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    mi.buffers[qwen::kCuWindows] = {"cu_window_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    mi.buffers[qwen::kInverse] = {"inverse_window_index", EG_DTYPE_I32, EG_PAD_ZERO};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void qwen_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status qwen_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] { encoder_kit::write_model_info(self(i).info, out); });
}

eg_status qwen_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] {
    *lo = self(i).opt.min_budget;
    *hi = self(i).opt.max_budget;
  });
}

// ---------------------------------------------------------------- items

// The grid an item of this description gets, after every check item_create
// makes on its geometry: item_create and item_spec_for_desc both take it from
// here, so the spec promised before decoding is the spec of the item made.
qwen::Grid checked_grid(const qwen::Options& o, const eg_item_desc* d) {
  if (d->height <= 0 || d->width <= 0 || d->frames <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: item geometry must be positive, got " +
                                      std::to_string(d->height) + "x" + std::to_string(d->width) +
                                      "x" + std::to_string(d->frames));
  if (d->modality == EG_MODALITY_IMAGE && d->frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: an image has exactly one frame, got " + std::to_string(d->frames));
  if (d->modality != EG_MODALITY_IMAGE && d->modality != EG_MODALITY_VIDEO)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: unknown modality " + std::to_string(d->modality));
  if (d->frames > o.max_frames_per_video)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: video of " + std::to_string(d->frames) +
             " frames exceeds max_frames_per_video = " + std::to_string(o.max_frames_per_video));
  if (d->height > qwen::kMaxSide || d->width > qwen::kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: item of " + std::to_string(d->height) + "x" +
                                      std::to_string(d->width) + " has a side over " +
                                      std::to_string(qwen::kMaxSide) + " pixels");
  const qwen::Grid g = qwen::grid_for(o, d->height, d->width, d->frames);
  // Patch values of the item (patches x patch_dim), bounded so that its
  // arrays and the int32 offsets of its sequences stay sound.
  const int64_t values = encoder_kit::checked_product({g.t, g.h, g.w, o.model.patch_dim()},
                                                      "qwen2_5_vl: the item's patch values");
  if (values > qwen::kMaxItemValues)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: item of " + std::to_string(d->height) + "x" + std::to_string(d->width) +
             " x " + std::to_string(d->frames) + " frames needs " + std::to_string(values) +
             " patch values, over the plugin's limit of " + std::to_string(qwen::kMaxItemValues) +
             ": lower max_pixels or max_frames_per_video");
  const int64_t unit_pixels = o.model.resize_factor() * o.model.resize_factor();
  const int64_t frame_units = g.h * g.w / o.model.merge_unit();
  if (frame_units > std::max<int64_t>(o.max_pixels / unit_pixels, 1))
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen2_5_vl: the processor's resize gives this " + std::to_string(d->height) + "x" +
             std::to_string(d->width) + " item " + std::to_string(frame_units * unit_pixels) +
             " pixels per frame, above max_pixels = " + std::to_string(o.max_pixels) +
             ": the resize keeps each side a multiple of " +
             std::to_string(o.model.resize_factor()) +
             " and never below it, so a very thin item (or min_pixels close to max_pixels) "
             "can exceed max_pixels; raise it to at least " +
             std::to_string(frame_units * unit_pixels) + " to accept it");
  return g;
}

// The spec of an item of grid `g` and `frames` decoded frames.
eg_item_spec spec_of(const qwen::Options& o, const qwen::Grid& g, int64_t frames) {
  eg_item_spec spec{};
  spec.input_size = g.patches();
  spec.output_tokens = g.patches() / o.model.merge_unit();
  spec.frames = frames;
  spec.path_tokens[0] = spec.output_tokens;  // the path's unit: merged tokens
  return spec;
}

eg_status qwen_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    const qwen::Options& o = self(i).opt;
    const qwen::Grid g = checked_grid(o, d);
    // The channel count matters only for pixels (checked while reading them).
    const std::vector<float> rows =
        d->pixels ? qwen::patch_rows_from_pixels(o, d->pixels, d->frames, d->height, d->width,
                                                 d->channels)
                  : qwen::synthetic_patch_rows(o.model, g, d->seed);
    auto item = std::make_unique<qwen::ItemData>(qwen::make_item_data(o, g, d->frames, rows));
    *out = reinterpret_cast<eg_item*>(item.release());
  });
}

void qwen_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<qwen::ItemData*>(item);
}

eg_status qwen_item_spec(eg_instance* i, const eg_item* item, eg_item_spec* out, eg_error* err) {
  return guarded(err, [&] {
    const qwen::ItemData& it = item_of(item);
    encoder_kit::write_item_spec(g_host, spec_of(self(i).opt, it.grid, it.frames), out);
  });
}

// 1.2: the spec before any pixels exist (data-parallel balancing).
eg_status qwen_item_spec_for_desc(eg_instance* i, const eg_item_desc* d, eg_item_spec* out,
                                  eg_error* err) {
  return guarded(err, [&] {
    const qwen::Options& o = self(i).opt;
    encoder_kit::write_item_spec(g_host, spec_of(o, checked_grid(o, d), d->frames), out);
  });
}

// ---------------------------------------------------------------- graph geometry

eg_status qwen_buffer_shape(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                            eg_error* err) {
  return guarded(err, [&] {
    const qwen::VisionConfig& c = self(i).opt.model;
    const qwen::Capacity cap = qwen::capacity_for(self(i).opt, *s);
    *out = eg_tensor{};
    out->ndim = 1;
    switch (index) {
      case qwen::kPixelRows:
        out->ndim = 2;
        out->shape[0] = cap.patches;
        out->shape[1] = c.patch_dim();
        break;
      case qwen::kRopeCos:
      case qwen::kRopeSin:
        out->ndim = 2;
        out->shape[0] = cap.patches;
        out->shape[1] = c.head_dim() / 2;
        break;
      case qwen::kCuFrames: out->shape[0] = cap.frames + 1; break;
      case qwen::kCuWindows: out->shape[0] = cap.windows + 1; break;
      case qwen::kInverse: out->shape[0] = cap.tokens; break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: no buffer " + std::to_string(index));
    }
  });
}

eg_status qwen_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out,
                            eg_error* err) {
  return guarded(err, [&] {
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = qwen::capacity_for(self(i).opt, *s).tokens;
    out->shape[1] = self(i).opt.model.out_hidden_size;
  });
}

eg_status qwen_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes,
                              eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const qwen::Capacity cap = qwen::capacity_for(in.opt, *s);
#ifdef QWEN_HAVE_CUDA
    if (in.cuda) {
      *bytes = in.cuda->workspace_bytes(cap);
      return;
    }
#endif
    *bytes = qwen::cpu_workspace_bytes(in.opt.model, cap);
  });
}

// ---------------------------------------------------------------- buffer values

qwen::StagingTarget target_of(const eg_tensor* t, const qwen::Capacity& cap) {
  qwen::StagingTarget st;
  st.pixels = t[qwen::kPixelRows].data;
  st.cos = static_cast<float*>(t[qwen::kRopeCos].data);
  st.sin = static_cast<float*>(t[qwen::kRopeSin].data);
  st.cu_frames = static_cast<int32_t*>(t[qwen::kCuFrames].data);
  st.cu_windows = static_cast<int32_t*>(t[qwen::kCuWindows].data);
  st.inverse = static_cast<int32_t*>(t[qwen::kInverse].data);
  st.cap = cap;
  return st;
}

// Host staging, copied and padded by the runtime: zero pixel and rotary rows
// (rows -1) keep every value finite; the whole tables decide how much work the
// warm-up does.
eg_status qwen_prepare_capture_staging(eg_instance* i, const eg_graph_shape* s,
                                       eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (nb != qwen::kNumBuffers) fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: expected 6 buffers");
    const qwen::CaptureTables t =
        qwen::capture_tables(in.opt.model, qwen::capacity_for(in.opt, *s));
    for (int b : {qwen::kPixelRows, qwen::kRopeCos, qwen::kRopeSin}) bufs[b].rows = -1;
    auto put = [&](int b, const std::vector<int32_t>& v) {
      if (tensor_bytes(bufs[b].staging) < v.size() * sizeof(int32_t))
        fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: staging of buffer " + std::to_string(b) +
                                          " is smaller than buffer_shape gave");
      std::memcpy(bufs[b].staging.data, v.data(), v.size() * sizeof(int32_t));
      bufs[b].rows = static_cast<int64_t>(v.size());
    };
    put(qwen::kCuFrames, t.cu_frames);
    put(qwen::kCuWindows, t.cu_windows);
    put(qwen::kInverse, t.inverse);
  });
}

eg_status qwen_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                      const eg_item* const* items, int64_t n,
                                      eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (nb != qwen::kNumBuffers) fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: expected 6 buffers");
    eg_tensor staging[qwen::kNumBuffers];
    for (int b = 0; b < qwen::kNumBuffers; ++b) staging[b] = bufs[b].staging;
    std::vector<const qwen::ItemData*> batch;
    for (int64_t k = 0; k < n; ++k) batch.push_back(&item_of(items[k]));
    const qwen::StagedRows rows =
        qwen::stage_batch(in.opt, batch, target_of(staging, qwen::capacity_for(in.opt, *s)));
    bufs[qwen::kPixelRows].rows = rows.patches;
    bufs[qwen::kRopeCos].rows = rows.patches;
    bufs[qwen::kRopeSin].rows = rows.patches;
    bufs[qwen::kCuFrames].rows = rows.frame_rows;
    bufs[qwen::kCuWindows].rows = rows.window_rows;
    bufs[qwen::kInverse].rows = rows.tokens;
  });
}

// ---------------------------------------------------------------- forward

// `tune`: the graph path's warm-up times the matrix products' algorithms for
// its size; eager runs (a new size each time) do not.
void run_forward(Instance& in, const eg_forward_args* a, bool tune) {
  if (a->num_buffers != qwen::kNumBuffers)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen2_5_vl: expected 6 buffers");
  const qwen::Capacity cap = qwen::capacity_for(in.opt, a->shape);
#ifdef QWEN_HAVE_CUDA
  if (in.cuda) {
    in.cuda->forward(cap, a->buffers, a->output.data, a->workspace, a->workspace_size, a->stream,
                     tune);
    return;
  }
#endif
  (void)tune;
  qwen::cpu_forward(in.opt.model, in.cpu_weights, cap, a->buffers,
                    static_cast<float*>(a->output.data), a->workspace, a->workspace_size);
}

eg_status qwen_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/self(i).opt.tune_gemm); });
}

eg_status qwen_forward_eager(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/false); });
}

const eg_plugin_api kApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_plugin_api),
    /* .reserved = */ 0,
    /* .name = */ "qwen2_5_vl",
    /* .version = */ "1.1.0",
    /* .description = */ "Qwen2.5-VL vision tower (window attention, 2-D rotary, patch merger)",
    /* .modalities = */ EG_MODALITY_IMAGE | EG_MODALITY_VIDEO,
#ifdef QWEN_HAVE_CUDA
    /* .devices = */ EG_DEVICE_CPU | EG_DEVICE_CUDA,
#else
    /* .devices = */ EG_DEVICE_CPU,
#endif
    /* .create = */ qwen_create,
    /* .destroy = */ qwen_destroy,
    /* .model_info = */ qwen_model_info,
    /* .budget_range = */ qwen_budget_range,
    /* .item_create = */ qwen_item_create,
    /* .item_destroy = */ qwen_item_destroy,
    /* .item_spec = */ qwen_item_spec,
    /* .select_axis_keys = */ nullptr,
    /* .buffer_shape = */ qwen_buffer_shape,
    /* .output_shape = */ qwen_output_shape,
    /* .workspace_size = */ qwen_workspace_size,
    /* .prepare_capture_inputs = */ nullptr,  // 1.1: prepare_capture_staging instead
    /* .prepare_replay_buffers = */ qwen_prepare_replay_buffers,
    /* .pad_buffer = */ nullptr,
    /* .forward = */ qwen_forward,
    /* .forward_eager = */ qwen_forward_eager,
    /* .postprocess = */ nullptr,
    /* .prepare_device = */ nullptr,
    /* .prepare_capture_staging = */ qwen_prepare_capture_staging,
    /* .output_shape_at = */ nullptr,
    /* .postprocess_outputs = */ nullptr,
    /* .item_spec_for_desc = */ qwen_item_spec_for_desc,
};

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  return encoder_kit::accept_host(host, g_host, kApi, /*min_minor=*/1);
}
