// The SigLIP vision tower (transformers' SiglipVisionModel) behind the encgraph
// plugin ABI ("siglip").
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
// resample ("bicubic" | "bilinear"), seed, check_finite (default true:
// NaN/Inf weights are an error), tune_gemm (CUDA: time the products'
// algorithms in each graph's warm-up; default true), tuning_cache (where those
// choices persist: a folder, "off", or unset for the default). Size keys are bounded (see
// VisionConfig::validate). Weights: a .safetensors file, a checkpoint
// directory or index json (sharded), or "random".
#include "siglip_batch.hpp"
#include "siglip_config.hpp"
#include "siglip_cpu_forward.hpp"
#include "siglip_preprocess.hpp"
#include "siglip_weights.hpp"

#include <encoder_kit/abi_guard.hpp>
#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/plugin_abi.hpp>

#include <encgraph/plugin_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#ifdef SIGLIP_HAVE_CUDA
#include "siglip_cuda_model.hpp"
#endif

namespace {

using encoder_kit::fail;
using encoder_kit::guarded;
using encoder_kit::tensor_bytes;

const eg_host_api* g_host = nullptr;

struct Instance {
  siglip::Options opt;
  int32_t device = EG_DEVICE_CPU;
  eg_model_info info{};
  siglip::Weights cpu_weights;  // CPU instances
#ifdef SIGLIP_HAVE_CUDA
  std::unique_ptr<siglip::CudaModel> cuda;  // CUDA instances
#endif
};

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}
const siglip::ItemData& item_of(const eg_item* i) {
  return *reinterpret_cast<const siglip::ItemData*>(i);
}

void log(eg_log_level level, const std::string& message) {
  encoder_kit::log_to_host(g_host, level, "siglip", message);
}

#ifndef SIGLIP_HAVE_CUDA
[[noreturn]] void no_cuda() {
  fail(EG_ERR_UNSUPPORTED, "siglip was built without its CUDA kernels; use device = \"cpu\"");
}
#endif

// The budget range in result rows (see the header comment).
std::pair<int64_t, int64_t> budget_range_of(const siglip::Options& o) {
  const int64_t n = o.max_budget_images;
  if (!o.pooled()) return {o.model.tokens_per_image(), o.model.tokens_per_image() * n};
  // Budgets count images, and the runtime infers max_items_per_batch as
  // min(max / min, min): a minimum near sqrt(n) gives the largest batches.
  // Set budgets.token_budgets and max_items_per_batch for full-size batches.
  int64_t lo = 1;
  while ((lo * 2) * (lo * 2) <= n) lo *= 2;
  return {lo, n};
}

// ---------------------------------------------------------------- lifetime

eg_status siglip_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
  return guarded(err, [&] {
    auto in = std::make_unique<Instance>();
    in->opt = siglip::parse_options(p);
    in->device = p->device;
    const siglip::Options& o = in->opt;
    const siglip::VisionConfig& c = o.model;
#ifndef SIGLIP_HAVE_CUDA
    if (in->device == EG_DEVICE_CUDA) no_cuda();
#endif
    const std::string weights = p->weights && *p->weights ? p->weights : "random";
    const encoder_kit::WeightSource source(weights, o.seed, o.check_finite);
    log(EG_LOG_INFO, "loading " + source.description() + " (" + std::to_string(o.layers_to_run()) +
                         " of " + std::to_string(c.num_hidden_layers) + " layers, hidden " +
                         std::to_string(c.hidden_size) + ", " +
                         std::to_string(c.tokens_per_image()) + " tokens per image)");
    siglip::Weights w = encoder_kit::naming_config_on_failure(
        o.config_path, [&] { return siglip::load_weights(o, source); });
    if (in->device == EG_DEVICE_CPU) {
      in->cpu_weights = std::move(w);
    } else {
#ifdef SIGLIP_HAVE_CUDA
      eg_graph_shape largest{};
      largest.token_budget = budget_range_of(o).second;
      in->cuda = std::make_unique<siglip::CudaModel>(
          o, w, p->device_index, siglip::capacity_for(o, largest),
          o.tune_gemm ? o.tuning_cache : std::string("off"),
          [](const std::string& message) { log(EG_LOG_WARN, message); });
#endif
    }
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = c.hidden_size;
    mi.out_dtype = o.dtype == siglip::Dtype::F32 ? EG_DTYPE_F32 : EG_DTYPE_BF16;
    mi.max_frames_per_video = 0;
    mi.num_paths = 1;
    mi.paths[0] = {"default", 0, 0, 0};
    mi.path_units[0] = o.pooled() ? "images" : "patch tokens";
    // Named outputs, the primary first: its rows are the item's output_tokens
    // (rows_per_item 0); every other output has a fixed row count per image.
    mi.num_outputs = static_cast<int32_t>(o.outputs.size());
    for (size_t k = 0; k < o.outputs.size(); ++k)
      mi.outputs[k] = {siglip::output_name(o.outputs[k]), c.hidden_size, mi.out_dtype, 0,
                       k == 0 ? 0 : o.rows_of(o.outputs[k])};
    mi.num_buffers = siglip::kNumBuffers;
    mi.buffers[siglip::kPixelRows] = {"pixel_rows", mi.out_dtype, EG_PAD_ZERO};
    mi.buffers[siglip::kCuSeqlens] = {"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void siglip_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status siglip_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] { encoder_kit::write_model_info(self(i).info, out); });
}

eg_status siglip_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] { std::tie(*lo, *hi) = budget_range_of(self(i).opt); });
}

// ---------------------------------------------------------------- items

// Every check item_create makes on an item's geometry: item_create and
// item_spec_for_desc both run it, so they accept and refuse the same items.
void check_geometry(const eg_item_desc* d) {
  if (d->modality != EG_MODALITY_IMAGE)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: only images are supported (modality " + std::to_string(d->modality) + ")");
  if (d->frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: an image has exactly one frame, got " + std::to_string(d->frames));
  if (d->height <= 0 || d->width <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: image size must be positive, got " +
                                      std::to_string(d->height) + "x" + std::to_string(d->width));
  if (d->height > siglip::kMaxSide || d->width > siglip::kMaxSide)
    fail(EG_ERR_INVALID_ARGUMENT, "siglip: image of " + std::to_string(d->height) + "x" +
                                      std::to_string(d->width) + " has a side over " +
                                      std::to_string(siglip::kMaxSide) + " pixels");
}

// Every image is resized to the model's square: one spec for all.
eg_item_spec image_spec(const siglip::Options& o) {
  eg_item_spec spec{};
  spec.input_size = o.model.tokens_per_image();
  spec.output_tokens = o.rows_per_image();
  spec.frames = 1;
  spec.path_tokens[0] = spec.output_tokens;  // the path's unit: patch tokens or images
  return spec;
}

eg_status siglip_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    const siglip::Options& o = self(i).opt;
    check_geometry(d);
    // The channel count matters only for pixels (checked while reading them).
    const std::vector<float> rows =
        d->pixels ? siglip::patch_rows_from_pixels(o, d->pixels, d->height, d->width, d->channels)
                  : siglip::synthetic_patch_rows(o, d->seed);
    auto item = std::make_unique<siglip::ItemData>(siglip::make_item_data(o, rows));
    *out = reinterpret_cast<eg_item*>(item.release());
  });
}

void siglip_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<siglip::ItemData*>(item);
}

eg_status siglip_item_spec(eg_instance* i, const eg_item*, eg_item_spec* out, eg_error* err) {
  return guarded(err, [&] { encoder_kit::write_item_spec(g_host, image_spec(self(i).opt), out); });
}

// 1.2: the spec before any pixels exist (data-parallel balancing).
eg_status siglip_item_spec_for_desc(eg_instance* i, const eg_item_desc* d, eg_item_spec* out,
                                    eg_error* err) {
  return guarded(err, [&] {
    check_geometry(d);
    encoder_kit::write_item_spec(g_host, image_spec(self(i).opt), out);
  });
}

// ---------------------------------------------------------------- graph geometry

eg_status siglip_buffer_shape(eg_instance* i, const eg_graph_shape* s, int32_t index,
                              eg_tensor* out, eg_error* err) {
  return guarded(err, [&] {
    const siglip::Options& o = self(i).opt;
    const siglip::Capacity cap = siglip::capacity_for(o, *s);
    *out = eg_tensor{};
    switch (index) {
      case siglip::kPixelRows:
        out->ndim = 2;
        out->shape[0] = cap.rows;
        out->shape[1] = o.model.patch_cols();
        break;
      case siglip::kCuSeqlens:
        out->ndim = 1;
        out->shape[0] = cap.images + 1;
        break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "siglip: no buffer " + std::to_string(index));
    }
  });
}

eg_status siglip_output_shape_at(eg_instance* i, const eg_graph_shape* s, int32_t index,
                                 eg_tensor* out, eg_error* err) {
  return guarded(err, [&] {
    const siglip::Options& o = self(i).opt;
    if (index < 0 || index >= static_cast<int32_t>(o.outputs.size()))
      fail(EG_ERR_INVALID_ARGUMENT, "siglip: no output " + std::to_string(index) + " (the config " +
                                        "declares " + std::to_string(o.outputs.size()) + ")");
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = siglip::capacity_for(o, *s).rows_of(o.outputs[static_cast<size_t>(index)]);
    out->shape[1] = o.model.hidden_size;
  });
}

eg_status siglip_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out,
                              eg_error* err) {
  return siglip_output_shape_at(i, s, 0, out, err);
}

eg_status siglip_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes,
                                eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const siglip::Capacity cap = siglip::capacity_for(in.opt, *s);
#ifdef SIGLIP_HAVE_CUDA
    if (in.cuda) {
      *bytes = in.cuda->workspace_bytes(cap);
      return;
    }
#endif
    *bytes = siglip::cpu_workspace_bytes(in.opt, cap);
  });
}

// ---------------------------------------------------------------- buffer values

void expect_buffers(int32_t n) {
  if (n != siglip::kNumBuffers)
    fail(EG_ERR_INVALID_ARGUMENT,
         "siglip: expected 2 buffers (pixel_rows, cu_seqlens), got " + std::to_string(n));
}

// Host staging, copied and padded by the runtime: zero pixels (rows -1) keep
// every value finite; the offsets make the warm-up do a full batch's work.
eg_status siglip_prepare_capture_staging(eg_instance* i, const eg_graph_shape* s,
                                         eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    expect_buffers(nb);
    const std::vector<int32_t> cu =
        siglip::capture_cu_seqlens(in.opt, siglip::capacity_for(in.opt, *s));
    eg_replay_buffer& dst = bufs[siglip::kCuSeqlens];
    if (tensor_bytes(dst.staging) < cu.size() * sizeof(int32_t))
      fail(EG_ERR_INVALID_ARGUMENT,
           "siglip: the cu_seqlens staging is smaller than buffer_shape gave");
    std::memcpy(dst.staging.data, cu.data(), cu.size() * sizeof(int32_t));
    dst.rows = static_cast<int64_t>(cu.size());
    bufs[siglip::kPixelRows].rows = -1;
  });
}

eg_status siglip_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                        const eg_item* const* items, int64_t n,
                                        eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    expect_buffers(nb);
    std::vector<const siglip::ItemData*> batch;
    for (int64_t k = 0; k < n; ++k) batch.push_back(&item_of(items[k]));
    const siglip::StagedRows rows = siglip::stage_batch(
        in.opt, siglip::capacity_for(in.opt, *s), batch, bufs[siglip::kPixelRows].staging.data,
        static_cast<int32_t*>(bufs[siglip::kCuSeqlens].staging.data));
    bufs[siglip::kPixelRows].rows = rows.pixel_rows;
    bufs[siglip::kCuSeqlens].rows = rows.cu_entries;
  });
}

// ---------------------------------------------------------------- forward

// `tune`: the graph path's warm-up times the matrix products' algorithms for
// its size (once a size); eager runs of exact sizes keep the heuristic's pick.
void run_forward(Instance& in, const eg_forward_args* a, bool tune) {
  expect_buffers(a->num_buffers);
  const siglip::Options& o = in.opt;
  const siglip::Capacity cap = siglip::capacity_for(o, a->shape);
  siglip::OutputPtrs outputs;
  for (size_t k = 0; k < o.outputs.size(); ++k) {
    void* data = encoder_kit::forward_output(*a, static_cast<int32_t>(k), "siglip");
    (o.outputs[k] == siglip::Output::Pooled ? outputs.pooled : outputs.last_hidden_state) = data;
  }
#ifdef SIGLIP_HAVE_CUDA
  if (in.cuda) {
    in.cuda->forward(cap, a->buffers, outputs, a->workspace, a->workspace_size, a->stream, tune);
    return;
  }
#endif
  (void)tune;
  siglip::cpu_forward(o, in.cpu_weights, cap, a->buffers, outputs, a->workspace, a->workspace_size);
}

eg_status siglip_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/self(i).opt.tune_gemm); });
}

eg_status siglip_forward_eager(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] { run_forward(self(i), a, /*tune=*/false); });
}

const eg_plugin_api kApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_plugin_api),
    /* .reserved = */ 0,
    /* .name = */ "siglip",
    /* .version = */ "1.1.0",
    /* .description = */
    "SigLIP vision tower (fixed resolution; last hidden state or a feature layer, and/or pooled)",
    /* .modalities = */ EG_MODALITY_IMAGE,
#ifdef SIGLIP_HAVE_CUDA
    /* .devices = */ EG_DEVICE_CPU | EG_DEVICE_CUDA,
#else
    /* .devices = */ EG_DEVICE_CPU,
#endif
    /* .create = */ siglip_create,
    /* .destroy = */ siglip_destroy,
    /* .model_info = */ siglip_model_info,
    /* .budget_range = */ siglip_budget_range,
    /* .item_create = */ siglip_item_create,
    /* .item_destroy = */ siglip_item_destroy,
    /* .item_spec = */ siglip_item_spec,
    /* .select_axis_keys = */ nullptr,
    /* .buffer_shape = */ siglip_buffer_shape,
    /* .output_shape = */ siglip_output_shape,
    /* .workspace_size = */ siglip_workspace_size,
    /* .prepare_capture_inputs = */ nullptr,  // 1.1: prepare_capture_staging instead
    /* .prepare_replay_buffers = */ siglip_prepare_replay_buffers,
    /* .pad_buffer = */ nullptr,
    /* .forward = */ siglip_forward,
    /* .forward_eager = */ siglip_forward_eager,
    /* .postprocess = */ nullptr,
    /* .prepare_device = */ nullptr,
    /* .prepare_capture_staging = */ siglip_prepare_capture_staging,
    /* .output_shape_at = */ siglip_output_shape_at,
    /* .postprocess_outputs = */ nullptr,
    /* .item_spec_for_desc = */ siglip_item_spec_for_desc,
};

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  return encoder_kit::accept_host(host, g_host, kApi, /*min_minor=*/1);
}
