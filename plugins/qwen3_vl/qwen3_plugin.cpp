// The Qwen3-VL vision tower behind the encgraph plugin ABI ("qwen3_vl"), as
// transformers' Qwen3VLVisionModel computes it (docs/models/qwen3_vl.md).
//
// Items are images (grid_thw = [1, h/16, w/16] after the processor's resize to
// multiples of 32) and videos (grid_t = ceil(frames / 2), the video
// processor's resize); each yields grid_t * h * w / 4 output tokens. Budgets
// count output tokens (the path's unit, "merged tokens"); a graph of budget B
// holds 4B patch rows, and its sequence table is sized by the shape's
// max_frames_per_batch, which the runtime's packer keeps every batch within.
//
// Outputs (ABI 1.1, one forward): "pooler_output" (the merger's, primary) and
// "deepstack_0..n-1" (the deepstack mergers' features in layer order), each
// [tokens, out_hidden_size], tokens in the processor's order.
//
// Graph buffers (qwen3_batch.hpp): pixel rows, the position embedding's
// bilinear corners and weights per patch, rotary cos/sin per patch, the
// cumulative patch offsets of the attention sequences (one per temporal patch;
// repeat-last padding keeps padded entries empty) and the token order. Padded
// rows are zero (no position embedding) and sit outside every sequence: rows
// never mix outside attention, and the token gather reads real rows only, so
// padding cannot reach a real output row.
//
// Config keys (the plugin's TOML table): config_json (a Hugging Face
// config.json; its vision_config), depth, hidden_size, num_heads,
// intermediate_size, out_hidden_size, patch_size, temporal_patch_size,
// spatial_merge_size, in_channels, num_position_embeddings,
// deepstack_visual_indexes (each overrides config_json), dtype (f32 on the
// CPU, bf16 on CUDA), min_pixels, max_pixels (images), video_min_pixels,
// video_max_pixels (all frames of a video together), min_budget, max_budget,
// max_frames_per_video, seed, tune_gemm, check_finite. Weights: a
// .safetensors file, a checkpoint directory / index json (tensors under
// `visual.` or `model.visual.`, detected; others ignored), or "random".
#include "qwen3_batch.hpp"
#include "qwen3_config.hpp"
#include "qwen3_cpu_forward.hpp"
#include "qwen3_layout.hpp"
#include "qwen3_preprocess.hpp"
#include "qwen3_weights.hpp"

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

#ifdef QWEN3_HAVE_CUDA
#include "qwen3_cuda_model.hpp"
#endif

namespace {

using encoder_kit::fail;
using encoder_kit::guarded;
using encoder_kit::tensor_bytes;
using qwen3::Buffer;

const eg_host_api* g_host = nullptr;

struct Instance {
  qwen3::Options opt;
  int32_t device = EG_DEVICE_CPU;
  int32_t device_index = 0;
  eg_model_info info{};
  qwen3::Weights cpu_weights;  // CPU instances
#ifdef QWEN3_HAVE_CUDA
  std::unique_ptr<qwen3::CudaModel> cuda;  // CUDA instances
#endif
};

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}
const qwen3::ItemData& item_of(const eg_item* i) {
  return *reinterpret_cast<const qwen3::ItemData*>(i);
}

void log(eg_log_level level, const std::string& message) {
  encoder_kit::log_to_host(g_host, level, "qwen3_vl", message);
}

// ---------------------------------------------------------------- lifetime

// Output names: the primary, then one per deepstack feature (EG_MAX_OUTPUTS
// bounds their count, validate() checks it).
constexpr const char* kOutputNames[EG_MAX_OUTPUTS] = {"pooler_output", "deepstack_0", "deepstack_1",
                                                      "deepstack_2",   "deepstack_3", "deepstack_4",
                                                      "deepstack_5",   "deepstack_6"};

eg_status q3_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
  return guarded(err, [&] {
    auto in = std::make_unique<Instance>();
    in->opt = qwen3::parse_options(p);
    in->device = p->device;
    in->device_index = p->device_index;
    const qwen3::VisionConfig& c = in->opt.model;
#ifndef QWEN3_HAVE_CUDA
    if (in->device == EG_DEVICE_CUDA)
      fail(EG_ERR_UNSUPPORTED, "qwen3_vl was built without its CUDA kernels; use device = \"cpu\"");
#endif
    const std::string weights = p->weights ? p->weights : "random";
    const encoder_kit::WeightSource source(weights, in->opt.seed, in->opt.check_finite);
    qwen3::Weights w = encoder_kit::naming_config_on_failure(
        in->opt.config_path, [&] { return qwen3::load_weights(c, source); });
    log(EG_LOG_INFO,
        "loaded " + source.description() +
            (source.is_random() ? std::string() : " (tensors under '" + w.prefix + "')") +
            " (depth " + std::to_string(c.depth) + ", hidden " + std::to_string(c.hidden_size) +
            ", out_hidden " + std::to_string(c.out_hidden_size) + ", " +
            std::to_string(c.num_deepstack()) + " deepstack outputs)");
    if (in->device == EG_DEVICE_CPU) {
      in->cpu_weights = std::move(w);
    } else {
#ifdef QWEN3_HAVE_CUDA
      in->cuda = std::make_unique<qwen3::CudaModel>(
          c, w, in->device_index, in->opt.max_budget * c.merge_unit(),
          in->opt.tune_gemm ? in->opt.tuning_cache : std::string("off"),
          [](const std::string& message) { log(EG_LOG_WARN, message); });
#endif
    }
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = c.out_hidden_size;
    mi.out_dtype = in->opt.dtype == qwen3::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    mi.max_frames_per_video = static_cast<int32_t>(in->opt.max_frames_per_video);
    mi.num_paths = 1;
    mi.paths[0] = {"default", 0, 0, 0};
    // Budgets and path_tokens count the tower's output rows: merged 2x2 units.
    mi.path_units[0] = "merged tokens";
    mi.num_outputs = static_cast<int32_t>(1 + c.num_deepstack());
    for (int32_t k = 0; k < mi.num_outputs; ++k)
      mi.outputs[k] = {kOutputNames[k], c.out_hidden_size, mi.out_dtype, 0, 0};
    mi.num_buffers = qwen3::kNumBuffers;
    mi.buffers[qwen3::kPixelRows] = {"pixel_rows", mi.out_dtype, EG_PAD_ZERO};
    mi.buffers[qwen3::kPosIndex] = {"pos_index", EG_DTYPE_I32, EG_PAD_ZERO};
    mi.buffers[qwen3::kPosWeight] = {"pos_weight", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[qwen3::kRopeCos] = {"rope_cos", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[qwen3::kRopeSin] = {"rope_sin", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[qwen3::kCuSeqlens] = {"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    mi.buffers[qwen3::kTokenIndex] = {"token_index", EG_DTYPE_I32, EG_PAD_ZERO};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void q3_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status q3_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] { encoder_kit::write_model_info(self(i).info, out); });
}

eg_status q3_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] {
    *lo = self(i).opt.min_budget;
    *hi = self(i).opt.max_budget;
  });
}

// ---------------------------------------------------------------- items

// The grid an item of this description gets, after every check item_create
// makes on its geometry: item_create and item_spec_for_desc both take it from
// here, so the spec promised before decoding is the spec of the item made.
qwen3::Grid checked_grid(const qwen3::Options& o, const eg_item_desc* d) {
  if (d->height <= 0 || d->width <= 0 || d->frames <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: item geometry must be positive, got " +
                                      std::to_string(d->height) + "x" + std::to_string(d->width) +
                                      "x" + std::to_string(d->frames));
  if (d->modality == EG_MODALITY_IMAGE && d->frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: an image has exactly one frame, got " + std::to_string(d->frames));
  if (d->modality != EG_MODALITY_IMAGE && d->modality != EG_MODALITY_VIDEO)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: unknown modality " + std::to_string(d->modality));
  if (d->frames > o.max_frames_per_video)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: video of " + std::to_string(d->frames) +
             " frames exceeds max_frames_per_video = " + std::to_string(o.max_frames_per_video));
  if (d->height > qwen3::kMaxSide || d->width > qwen3::kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: item of " + std::to_string(d->height) + "x" +
                                      std::to_string(d->width) + " has a side over " +
                                      std::to_string(qwen3::kMaxSide) + " pixels");
  const bool video = d->modality == EG_MODALITY_VIDEO;
  const qwen3::Grid g = qwen3::grid_for(o, video, d->height, d->width, d->frames);
  const int64_t values = encoder_kit::checked_product({g.t, g.h, g.w, o.model.patch_dim()},
                                                      "qwen3_vl: the item's patch values");
  if (values > qwen3::kMaxItemValues)
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: item of " + std::to_string(d->height) + "x" + std::to_string(d->width) + " x " +
             std::to_string(d->frames) + " frames needs " + std::to_string(values) +
             " patch values, over the plugin's limit of " + std::to_string(qwen3::kMaxItemValues) +
             ": lower max_pixels, video_max_pixels or max_frames_per_video");
  const int64_t unit_pixels = o.model.resize_factor() * o.model.resize_factor();
  const int64_t frame_units = g.h * g.w / o.model.merge_unit();
  if (frame_units > qwen3::max_frame_units(o))
    fail(EG_ERR_INVALID_ARGUMENT,
         "qwen3_vl: the processor's resize gives this " + std::to_string(d->height) + "x" +
             std::to_string(d->width) + " item " + std::to_string(frame_units * unit_pixels) +
             " pixels per frame, above what max_pixels / video_max_pixels allow: the resize "
             "keeps each side a multiple of " +
             std::to_string(o.model.resize_factor()) +
             " and never below it, so a very thin item (or min_pixels close to max_pixels) "
             "can exceed the bound; raise max_pixels (video_max_pixels for videos) to at "
             "least " +
             std::to_string(frame_units * unit_pixels) + " to accept it");
  return g;
}

// The spec of an item of grid `g` and `frames` decoded frames.
eg_item_spec spec_of(const qwen3::Options& o, const qwen3::Grid& g, int64_t frames) {
  eg_item_spec spec{};
  spec.input_size = g.patches();
  spec.output_tokens = g.patches() / o.model.merge_unit();
  spec.frames = frames;
  spec.path_tokens[0] = spec.output_tokens;  // the path's unit: merged tokens
  return spec;
}

eg_status q3_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    const qwen3::Options& o = self(i).opt;
    const qwen3::Grid g = checked_grid(o, d);
    const bool video = d->modality == EG_MODALITY_VIDEO;
    // The channel count matters only for pixels (checked while reading them).
    const std::vector<float> rows =
        d->pixels ? qwen3::patch_rows_from_pixels(o, video, d->pixels, d->frames, d->height,
                                                  d->width, d->channels)
                  : qwen3::synthetic_patch_rows(o.model, g, d->seed);
    auto item = std::make_unique<qwen3::ItemData>(qwen3::make_item_data(o, g, d->frames, rows));
    *out = reinterpret_cast<eg_item*>(item.release());
  });
}

void q3_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<qwen3::ItemData*>(item);
}

eg_status q3_item_spec(eg_instance* i, const eg_item* item, eg_item_spec* out, eg_error* err) {
  return guarded(err, [&] {
    const qwen3::ItemData& it = item_of(item);
    encoder_kit::write_item_spec(g_host, spec_of(self(i).opt, it.grid, it.frames), out);
  });
}

// 1.2: the spec before any pixels exist (data-parallel balancing).
eg_status q3_item_spec_for_desc(eg_instance* i, const eg_item_desc* d, eg_item_spec* out,
                                eg_error* err) {
  return guarded(err, [&] {
    const qwen3::Options& o = self(i).opt;
    encoder_kit::write_item_spec(g_host, spec_of(o, checked_grid(o, d), d->frames), out);
  });
}

// ---------------------------------------------------------------- graph geometry

eg_status q3_buffer_shape(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                          eg_error* err) {
  return guarded(err, [&] {
    const qwen3::VisionConfig& c = self(i).opt.model;
    const qwen3::Capacity cap = qwen3::capacity_for(self(i).opt, *s);
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = cap.patches;
    switch (index) {
      case qwen3::kPixelRows: out->shape[1] = c.patch_dim(); break;
      case qwen3::kPosIndex:
      case qwen3::kPosWeight: out->shape[1] = 4; break;
      case qwen3::kRopeCos:
      case qwen3::kRopeSin: out->shape[1] = c.head_dim() / 2; break;
      case qwen3::kCuSeqlens:
        out->ndim = 1;
        out->shape[0] = cap.frames + 1;
        break;
      case qwen3::kTokenIndex:
        out->ndim = 1;
        out->shape[0] = cap.tokens;
        break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: no buffer " + std::to_string(index));
    }
  });
}

eg_status q3_output_shape_at(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                             eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (index < 0 || index >= in.info.num_outputs)
      fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: no output " + std::to_string(index) +
                                        " (the instance declares " +
                                        std::to_string(in.info.num_outputs) + ")");
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = qwen3::capacity_for(in.opt, *s).tokens;
    out->shape[1] = in.opt.model.out_hidden_size;
  });
}

eg_status q3_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out, eg_error* err) {
  return q3_output_shape_at(i, s, 0, out, err);
}

eg_status q3_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const qwen3::Capacity cap = qwen3::capacity_for(in.opt, *s);
#ifdef QWEN3_HAVE_CUDA
    if (in.cuda) {
      *bytes = in.cuda->workspace_bytes(cap);
      return;
    }
#endif
    *bytes = qwen3::cpu_workspace_bytes(in.opt.model, cap);
  });
}

// ---------------------------------------------------------------- buffer values

void check_buffer_count(int32_t nb) {
  if (nb != qwen3::kNumBuffers)
    fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: expected " + std::to_string(qwen3::kNumBuffers) +
                                      " buffers, got " + std::to_string(nb));
}

// Host staging, copied and padded by the runtime: zero pixel, weight and
// rotary rows (rows -1) keep every value finite; the sequence table decides
// how much work the warm-up does.
eg_status q3_prepare_capture_staging(eg_instance* i, const eg_graph_shape* s,
                                     eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    check_buffer_count(nb);
    const qwen3::CaptureTables t =
        qwen3::capture_tables(in.opt.model, qwen3::capacity_for(in.opt, *s));
    for (int b :
         {qwen3::kPixelRows, qwen3::kPosIndex, qwen3::kPosWeight, qwen3::kRopeCos, qwen3::kRopeSin})
      bufs[b].rows = -1;
    auto put = [&](int b, const std::vector<int32_t>& v) {
      if (tensor_bytes(bufs[b].staging) < v.size() * sizeof(int32_t))
        fail(EG_ERR_INVALID_ARGUMENT, "qwen3_vl: staging of buffer " + std::to_string(b) +
                                          " is smaller than buffer_shape gave");
      std::memcpy(bufs[b].staging.data, v.data(), v.size() * sizeof(int32_t));
      bufs[b].rows = static_cast<int64_t>(v.size());
    };
    put(qwen3::kCuSeqlens, t.cu_seqlens);
    put(qwen3::kTokenIndex, t.token_index);
  });
}

eg_status q3_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                    const eg_item* const* items, int64_t n, eg_replay_buffer* bufs,
                                    int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    check_buffer_count(nb);
    qwen3::StagingTarget t;
    t.pixels = bufs[qwen3::kPixelRows].staging.data;
    t.pos_index = static_cast<int32_t*>(bufs[qwen3::kPosIndex].staging.data);
    t.pos_weight = static_cast<float*>(bufs[qwen3::kPosWeight].staging.data);
    t.cos = static_cast<float*>(bufs[qwen3::kRopeCos].staging.data);
    t.sin = static_cast<float*>(bufs[qwen3::kRopeSin].staging.data);
    t.cu_seqlens = static_cast<int32_t*>(bufs[qwen3::kCuSeqlens].staging.data);
    t.token_index = static_cast<int32_t*>(bufs[qwen3::kTokenIndex].staging.data);
    t.cap = qwen3::capacity_for(in.opt, *s);
    std::vector<const qwen3::ItemData*> batch;
    for (int64_t k = 0; k < n; ++k) batch.push_back(&item_of(items[k]));
    const qwen3::StagedRows rows = qwen3::stage_batch(in.opt, batch, t);
    for (int b :
         {qwen3::kPixelRows, qwen3::kPosIndex, qwen3::kPosWeight, qwen3::kRopeCos, qwen3::kRopeSin})
      bufs[b].rows = rows.patches;
    bufs[qwen3::kCuSeqlens].rows = rows.seq_rows;
    bufs[qwen3::kTokenIndex].rows = rows.tokens;
  });
}

// ---------------------------------------------------------------- forward

// `tune`: the graph path's warm-up times the matrix products' algorithms for
// its size; eager runs (a new size each time) do not.
void run_forward(Instance& in, const eg_forward_args* a, bool tune) {
  check_buffer_count(a->num_buffers);
  const qwen3::Capacity cap = qwen3::capacity_for(in.opt, a->shape);
  const int32_t num_outputs = in.info.num_outputs;
  std::vector<void*> outputs(static_cast<size_t>(num_outputs));
  for (int32_t k = 0; k < num_outputs; ++k)
    outputs[static_cast<size_t>(k)] = encoder_kit::forward_output(*a, k, "qwen3_vl");
#ifdef QWEN3_HAVE_CUDA
  if (in.cuda) {
    in.cuda->forward(cap, a->buffers, outputs.data(), num_outputs, a->workspace, a->workspace_size,
                     a->stream, tune);
    return;
  }
#endif
  (void)tune;
  std::vector<float*> f32(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) f32[k] = static_cast<float*>(outputs[k]);
  qwen3::cpu_forward(in.opt.model, in.cpu_weights, cap, a->buffers, f32.data(), a->workspace,
                     a->workspace_size);
}

eg_status q3_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/self(i).opt.tune_gemm); });
}

eg_status q3_forward_eager(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/false); });
}

const eg_plugin_api kApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_plugin_api),
    /* .reserved = */ 0,
    /* .name = */ "qwen3_vl",
    /* .version = */ "1.1.0",
    /* .description = */
    "Qwen3-VL vision tower (interpolated position embedding, 2-D rotary, deepstack outputs)",
    /* .modalities = */ EG_MODALITY_IMAGE | EG_MODALITY_VIDEO,
#ifdef QWEN3_HAVE_CUDA
    /* .devices = */ EG_DEVICE_CPU | EG_DEVICE_CUDA,
#else
    /* .devices = */ EG_DEVICE_CPU,
#endif
    /* .create = */ q3_create,
    /* .destroy = */ q3_destroy,
    /* .model_info = */ q3_model_info,
    /* .budget_range = */ q3_budget_range,
    /* .item_create = */ q3_item_create,
    /* .item_destroy = */ q3_item_destroy,
    /* .item_spec = */ q3_item_spec,
    /* .select_axis_keys = */ nullptr,
    /* .buffer_shape = */ q3_buffer_shape,
    /* .output_shape = */ q3_output_shape,
    /* .workspace_size = */ q3_workspace_size,
    /* .prepare_capture_inputs = */ nullptr,  // 1.1: prepare_capture_staging instead
    /* .prepare_replay_buffers = */ q3_prepare_replay_buffers,
    /* .pad_buffer = */ nullptr,
    /* .forward = */ q3_forward,
    /* .forward_eager = */ q3_forward_eager,
    /* .postprocess = */ nullptr,
    /* .prepare_device = */ nullptr,
    /* .prepare_capture_staging = */ q3_prepare_capture_staging,
    /* .output_shape_at = */ q3_output_shape_at,
    /* .postprocess_outputs = */ nullptr,
    /* .item_spec_for_desc = */ q3_item_spec_for_desc,
};

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  return encoder_kit::accept_host(host, g_host, kApi, /*min_minor=*/1);
}
