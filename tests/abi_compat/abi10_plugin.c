/*
 * abi10: an ABI 1.0 plugin, kept to prove that 1.0 plugins load and run in the
 * 1.1 runtime. It is the former examples/abi10_plugin (plain C99), compiled
 * against the frozen v1.0 header in v1_0/ (see v1_0/README.md), and does what
 * every 1.0 plugin does: fills its graph buffers on the device in
 * prepare_capture_inputs, declares no outputs (one output, "embeddings"),
 * copies its whole eg_model_info with `*out = info` (488 bytes in 1.0), and has
 * the runtime use output_tokens as its one path's tokens (path_tokens[0] is
 * left 0 here to prove the runtime does not read it).
 *
 * Each 8x8 patch of an RGB image becomes one row of 4 values: the patch's mean
 * red, green and blue (times the config's `scale`) and its index in the image.
 */
#include <encgraph/plugin_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATCH 8
#define CHANNELS 3
#define HIDDEN 4 /* CHANNELS means + the patch's index in its image */

enum { BUF_PATCHES = 0, BUF_CU_SEQLENS = 1, NUM_BUFFERS = 2 };

typedef struct abi10_instance {
  float scale;
  eg_model_info info;
} abi10_instance;

typedef struct abi10_item {
  int64_t tokens;
  float* patches; /* tokens x CHANNELS */
} abi10_item;

/* Set by the entry function; valid for the life of the process. */
static const eg_host_api* g_host = NULL;

static void log_message(int32_t level, const char* message) {
  if (g_host && g_host->log) g_host->log(g_host->host_context, level, "abi10", message);
}

/* C has no exceptions to catch: every function reports through its status and
 * the caller's eg_error. */
static eg_status fail(eg_error* err, eg_status status, const char* message) {
  if (err) snprintf(err->message, sizeof err->message, "%s", message);
  return status;
}

static abi10_instance* self(eg_instance* instance) {
  return (abi10_instance*)instance;
}
static const abi10_item* item_of(const eg_item* item) {
  return (const abi10_item*)item;
}

/* ------------------------------------------------------------- the instance */

static eg_status abi10_create(const eg_create_params* params, eg_instance** out, eg_error* err) {
  abi10_instance* in;
  int64_t i;
  float scale = 1.0f;
  if (params->device != EG_DEVICE_CPU)
    return fail(err, EG_ERR_UNSUPPORTED, "the abi10 plugin runs on the CPU only");
  if (params->weights && strcmp(params->weights, "random") != 0)
    return fail(err, EG_ERR_INVALID_ARGUMENT,
                "the abi10 plugin has no weights; leave weights unset or use \"random\"");
  for (i = 0; i < params->num_config; ++i) {
    const eg_config_entry* e = &params->config[i];
    char* end = NULL;
    if (strcmp(e->key, "scale") != 0) {
      if (err)
        snprintf(err->message, sizeof err->message, "unknown config key '%s' (known: scale)",
                 e->key);
      return EG_ERR_INVALID_ARGUMENT;
    }
    scale = strtof(e->value, &end);
    if (end == e->value || *end != '\0')
      return fail(err, EG_ERR_INVALID_ARGUMENT, "config key 'scale' must be a number");
  }
  in = (abi10_instance*)calloc(1, sizeof *in);
  if (!in) return fail(err, EG_ERR_OUT_OF_MEMORY, "out of host memory");
  in->scale = scale;
  in->info.struct_size = sizeof in->info;
  in->info.out_hidden_size = HIDDEN;
  in->info.out_dtype = EG_DTYPE_F32;
  in->info.max_frames_per_video = 0; /* images only */
  in->info.num_paths = 1;
  in->info.paths[0] = (eg_path_info){"default", 0, 0, 0};
  in->info.num_buffers = NUM_BUFFERS;
  in->info.buffers[BUF_PATCHES] = (eg_buffer_info){"patches", EG_DTYPE_F32, EG_PAD_ZERO};
  /* Cumulative offsets: repeating the last one makes the padding sequences empty. */
  in->info.buffers[BUF_CU_SEQLENS] =
      (eg_buffer_info){"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
  *out = (eg_instance*)in;
  log_message(EG_LOG_DEBUG, "instance created");
  return EG_OK;
}

static void abi10_destroy(eg_instance* instance) {
  free(instance);
}

static eg_status abi10_model_info(eg_instance* instance, eg_model_info* out, eg_error* err) {
  (void)err;
  *out = self(instance)->info;
  return EG_OK;
}

static eg_status abi10_budget_range(eg_instance* instance, int64_t* min_budget, int64_t* max_budget,
                                    eg_error* err) {
  (void)instance;
  (void)err;
  *min_budget = 16;
  *max_budget = 1024;
  return EG_OK;
}

/* ------------------------------------------------------------------- items */

/* A deterministic value in [0, 1) from a seed and a position. */
static float draw(uint64_t seed, uint64_t k) {
  uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  z ^= z >> 29;
  return (float)(z >> 40) / (float)(1ull << 24);
}

static eg_status abi10_item_create(eg_instance* instance, const eg_item_desc* desc, eg_item** out,
                                   eg_error* err) {
  abi10_item* it;
  int64_t ph, pw, t, c;
  (void)instance;
  if (desc->modality != EG_MODALITY_IMAGE || desc->frames != 1)
    return fail(err, EG_ERR_UNSUPPORTED, "the abi10 plugin encodes single images only");
  if (desc->height <= 0 || desc->width <= 0)
    return fail(err, EG_ERR_INVALID_ARGUMENT, "image height and width must be positive");
  if (desc->pixels && desc->channels != CHANNELS)
    return fail(err, EG_ERR_INVALID_ARGUMENT, "pixels must be RGB (3 channels)");
  ph = desc->height / PATCH > 0 ? desc->height / PATCH : 1;
  pw = desc->width / PATCH > 0 ? desc->width / PATCH : 1;
  it = (abi10_item*)calloc(1, sizeof *it);
  if (!it) return fail(err, EG_ERR_OUT_OF_MEMORY, "out of host memory");
  it->tokens = ph * pw;
  it->patches = (float*)calloc((size_t)(it->tokens * CHANNELS), sizeof(float));
  if (!it->patches) {
    free(it);
    return fail(err, EG_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  for (t = 0; t < it->tokens; ++t) {
    for (c = 0; c < CHANNELS; ++c) {
      float sum = 0.0f;
      int64_t y, x, n = 0;
      if (!desc->pixels) {
        it->patches[t * CHANNELS + c] = draw(desc->seed, (uint64_t)(t * CHANNELS + c));
        continue;
      }
      for (y = (t / pw) * PATCH; y < (t / pw + 1) * PATCH && y < desc->height; ++y)
        for (x = (t % pw) * PATCH; x < (t % pw + 1) * PATCH && x < desc->width; ++x, ++n)
          sum += desc->pixels[(y * desc->width + x) * CHANNELS + c] / 255.0f;
      it->patches[t * CHANNELS + c] = n > 0 ? sum / (float)n : 0.0f;
    }
  }
  *out = (eg_item*)it;
  return EG_OK;
}

static void abi10_item_destroy(eg_instance* instance, eg_item* item) {
  abi10_item* it = (abi10_item*)item;
  (void)instance;
  if (!it) return;
  free(it->patches);
  free(it);
}

static eg_status abi10_item_spec(eg_instance* instance, const eg_item* item, eg_item_spec* out,
                                 eg_error* err) {
  (void)instance;
  (void)err;
  memset(out, 0, sizeof *out);
  out->input_size = item_of(item)->tokens;
  out->output_tokens = item_of(item)->tokens;
  out->frames = 1;
  /* path_tokens stays 0: for a 1.0 plugin the runtime uses output_tokens. */
  return EG_OK;
}

/* ------------------------------------------------------- graph geometry */

static eg_status abi10_buffer_shape(eg_instance* instance, const eg_graph_shape* shape,
                                    int32_t index, eg_tensor* out, eg_error* err) {
  (void)instance;
  memset(out, 0, sizeof *out);
  out->ndim = index == BUF_PATCHES ? 2 : 1;
  if (index == BUF_PATCHES) {
    out->shape[0] = shape->token_budget; /* one row per token */
    out->shape[1] = CHANNELS;
  } else if (index == BUF_CU_SEQLENS) {
    out->shape[0] = shape->max_batch_size + 1; /* one offset per item, plus the end */
  } else {
    return fail(err, EG_ERR_INVALID_ARGUMENT, "no such buffer");
  }
  return EG_OK;
}

static eg_status abi10_output_shape(eg_instance* instance, const eg_graph_shape* shape,
                                    eg_tensor* out, eg_error* err) {
  (void)instance;
  (void)err;
  memset(out, 0, sizeof *out);
  out->ndim = 2;
  out->shape[0] = shape->token_budget;
  out->shape[1] = HIDDEN;
  return EG_OK;
}

static eg_status abi10_workspace_size(eg_instance* instance, const eg_graph_shape* shape,
                                      size_t* bytes, eg_error* err) {
  (void)instance;
  (void)shape;
  (void)err;
  *bytes = 0; /* the forward needs no scratch */
  return EG_OK;
}

/* ------------------------------------------------------------ filling buffers */

/* Dummy but valid values for warm-up and capture: one sequence over all rows. On
 * the CPU the buffers are host memory; a CUDA plugin would copy on `stream`. */
static eg_status abi10_prepare_capture_inputs(eg_instance* instance, const eg_graph_shape* shape,
                                              const eg_tensor* buffers, int32_t num_buffers,
                                              void* stream, eg_error* err) {
  int32_t* cu = (int32_t*)buffers[BUF_CU_SEQLENS].data;
  int64_t k;
  (void)instance;
  (void)stream;
  if (num_buffers != NUM_BUFFERS) return fail(err, EG_ERR_INVALID_ARGUMENT, "expected 2 buffers");
  memset(buffers[BUF_PATCHES].data, 0, (size_t)(shape->token_budget * CHANNELS) * sizeof(float));
  cu[0] = 0;
  for (k = 1; k < buffers[BUF_CU_SEQLENS].shape[0]; ++k) cu[k] = (int32_t)shape->token_budget;
  return EG_OK;
}

/* A batch's real values into host staging. The runtime copies `rows` leading rows
 * of each and pads the rest: zeros for patches, the last offset for cu_seqlens. */
static eg_status abi10_prepare_replay_buffers(eg_instance* instance, const eg_graph_shape* shape,
                                              const eg_item* const* items, int64_t num_items,
                                              eg_replay_buffer* buffers, int32_t num_buffers,
                                              eg_error* err) {
  float* patches = (float*)buffers[BUF_PATCHES].staging.data;
  int32_t* cu = (int32_t*)buffers[BUF_CU_SEQLENS].staging.data;
  int64_t k, row = 0;
  (void)instance;
  if (num_buffers != NUM_BUFFERS) return fail(err, EG_ERR_INVALID_ARGUMENT, "expected 2 buffers");
  if (num_items + 1 > buffers[BUF_CU_SEQLENS].staging.shape[0])
    return fail(err, EG_ERR_INVALID_ARGUMENT, "more items than max_batch_size");
  cu[0] = 0;
  for (k = 0; k < num_items; ++k) {
    const abi10_item* it = item_of(items[k]);
    if (row + it->tokens > shape->token_budget)
      return fail(err, EG_ERR_INVALID_ARGUMENT, "batch has more tokens than the budget");
    memcpy(patches + row * CHANNELS, it->patches, (size_t)(it->tokens * CHANNELS) * sizeof(float));
    row += it->tokens;
    cu[k + 1] = (int32_t)row;
  }
  buffers[BUF_PATCHES].rows = row;
  buffers[BUF_CU_SEQLENS].rows = num_items + 1;
  return EG_OK;
}

/* ------------------------------------------------------------------ forward */

/* Graph-safe: reads only the buffers, writes only the output, allocates nothing.
 * Rows past the last offset are padding and are written as zeros. */
static eg_status abi10_forward(eg_instance* instance, const eg_forward_args* args, eg_error* err) {
  const float* patches = (const float*)args->buffers[BUF_PATCHES].data;
  const int32_t* cu = (const int32_t*)args->buffers[BUF_CU_SEQLENS].data;
  const int64_t num_seqs = args->buffers[BUF_CU_SEQLENS].shape[0] - 1;
  const int64_t budget = args->shape.token_budget;
  const float scale = self(instance)->scale;
  float* out = (float*)args->output.data;
  int64_t s, r, c;
  if (args->num_buffers != NUM_BUFFERS)
    return fail(err, EG_ERR_INVALID_ARGUMENT, "expected 2 buffers");
  if (cu[num_seqs] > budget) return fail(err, EG_ERR_INVALID_ARGUMENT, "offsets past the budget");
  for (s = 0; s < num_seqs; ++s) {
    for (r = cu[s]; r < cu[s + 1]; ++r) {
      for (c = 0; c < CHANNELS; ++c) out[r * HIDDEN + c] = scale * patches[r * CHANNELS + c];
      out[r * HIDDEN + CHANNELS] = (float)(r - cu[s]);
    }
  }
  for (r = cu[num_seqs]; r < budget; ++r)
    for (c = 0; c < HIDDEN; ++c) out[r * HIDDEN + c] = 0.0f;
  return EG_OK;
}

/* ------------------------------------------------------------- the table */

static const eg_plugin_api abi10_api = {
    /* ABI identification: checked by the loader before anything else. */
    .abi_major = EG_ABI_VERSION_MAJOR,
    .abi_minor = EG_ABI_VERSION_MINOR,
    .struct_size = sizeof(eg_plugin_api),
    .name = "abi10",
    .version = "1.0.0",
    .description = "8x8 patch means: the ABI 1.0 compatibility plugin",
    .modalities = EG_MODALITY_IMAGE,
    .devices = EG_DEVICE_CPU,
    .create = abi10_create,
    .destroy = abi10_destroy,
    .model_info = abi10_model_info,
    .budget_range = abi10_budget_range,
    .item_create = abi10_item_create,
    .item_destroy = abi10_item_destroy,
    .item_spec = abi10_item_spec,
    .select_axis_keys = NULL, /* no capture axes */
    .buffer_shape = abi10_buffer_shape,
    .output_shape = abi10_output_shape,
    .workspace_size = abi10_workspace_size,
    .prepare_capture_inputs = abi10_prepare_capture_inputs,
    .prepare_replay_buffers = abi10_prepare_replay_buffers,
    .pad_buffer = NULL, /* no EG_PAD_CALLBACK buffer */
    .forward = abi10_forward,
    .forward_eager = NULL, /* eager runs call forward with the exact token count */
    .postprocess = NULL,   /* the runtime copies each item's consecutive rows */
    .prepare_device = NULL,
};

/* The one exported symbol (the version script hides everything else). */
EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  g_host = host;
  if (host && host->abi_major != EG_ABI_VERSION_MAJOR) {
    log_message(EG_LOG_ERROR, "built for another plugin ABI major version");
    return NULL;
  }
  return &abi10_api;
}
