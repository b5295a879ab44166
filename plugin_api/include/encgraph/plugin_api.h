/*
 * encgraph plugin ABI, version 1.4 (1.0 to 1.3 plugins load and run unchanged).
 *
 * A plugin is a shared library that exports exactly one C symbol,
 * `encgraph_plugin_entry` (see EG_PLUGIN_ENTRY_SYMBOL). The runtime calls it with
 * its own ABI version and a table of host services; the plugin returns a pointer to
 * a static `eg_plugin_api` table describing itself and its functions.
 *
 * Rules (docs/plugin-abi.md has the full contract):
 *  - Only C crosses the boundary: POD structs, opaque handles, `const char*`,
 *    tensor views. No exception may escape an exported function.
 *  - Every fallible call returns `eg_status` and, on failure, writes a message into
 *    the caller's `eg_error`.
 *  - Tables only grow at the end. `struct_size` says which fields exist; the
 *    offsets of released fields are frozen by the static assertions at the bottom.
 *  - The runtime owns every buffer recorded into a graph (inputs, output,
 *    workspace) and every stream. Inside `forward` a plugin must not allocate,
 *    synchronise, load modules or launch work on any stream but the one given.
 *
 * The header is C99 and C++ compatible and has no dependency beyond <stddef.h>
 * and <stdint.h>. A CUDA stream crosses as `void*` (a cudaStream_t).
 */
#ifndef ENCGRAPH_PLUGIN_API_H
#define ENCGRAPH_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EG_ABI_VERSION_MAJOR 1u
#define EG_ABI_VERSION_MINOR 4u

/* The one symbol a plugin exports. */
#define EG_PLUGIN_ENTRY_SYMBOL "encgraph_plugin_entry"

#if defined(_WIN32)
#define EG_PLUGIN_EXPORT __declspec(dllexport)
#else
#define EG_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Fixed capacities of the ABI's arrays. Changing them is a major version. */
#define EG_MAX_DIMS 6
#define EG_MAX_PATHS 4
#define EG_MAX_CAPTURE_AXES 4
#define EG_MAX_BUFFERS 16
#define EG_ERROR_MESSAGE_CAPACITY 1024
/* 1.1: capacity of eg_model_info.outputs (only 1.1 fields use it). */
#define EG_MAX_OUTPUTS 8

/* ------------------------------------------------------------------ basic types */

typedef enum eg_status {
  EG_OK = 0,
  EG_ERR_INVALID_ARGUMENT = 1, /* bad config value, bad item, bad call */
  EG_ERR_NOT_FOUND = 2,        /* missing file, tensor, key */
  EG_ERR_OUT_OF_MEMORY = 3,    /* an allocation failed (host or device) */
  EG_ERR_UNSUPPORTED = 4,      /* device, dtype or feature not supported */
  EG_ERR_DEVICE = 5,           /* a CUDA (or other device) call failed */
  EG_ERR_IO = 6,               /* reading weights or files failed */
  EG_ERR_INTERNAL = 7          /* anything else, including caught exceptions */
} eg_status;

typedef enum eg_dtype {
  EG_DTYPE_F32 = 0,
  EG_DTYPE_F16 = 1,
  EG_DTYPE_BF16 = 2,
  EG_DTYPE_F64 = 3,
  EG_DTYPE_I32 = 4,
  EG_DTYPE_I64 = 5,
  EG_DTYPE_U8 = 6
} eg_dtype;

/* Devices, also used as a bit set in `eg_plugin_api.devices`. */
typedef enum eg_device_type { EG_DEVICE_CPU = 1, EG_DEVICE_CUDA = 2 } eg_device_type;

/* Modalities, also used as a bit set in `eg_plugin_api.modalities`. */
typedef enum eg_modality { EG_MODALITY_IMAGE = 1, EG_MODALITY_VIDEO = 2 } eg_modality;

/* How the runtime refreshes a captured input buffer before replay, after the
 * plugin has written `rows` leading rows of real values. */
typedef enum eg_padding_logic {
  EG_PAD_ZERO = 0,        /* rows past the real ones are zero-filled (the default) */
  EG_PAD_REPEAT_LAST = 1, /* rows past the real ones repeat the last real row:
                             cumulative offsets stay non-decreasing */
  EG_PAD_CALLBACK = 2     /* the plugin's `pad_buffer` fills the rest */
} eg_padding_logic;

typedef enum eg_log_level {
  EG_LOG_TRACE = 0,
  EG_LOG_DEBUG = 1,
  EG_LOG_INFO = 2,
  EG_LOG_WARN = 3,
  EG_LOG_ERROR = 4
} eg_log_level;

/* Error out-parameter: the plugin writes a NUL-terminated message. */
typedef struct eg_error {
  char message[EG_ERROR_MESSAGE_CAPACITY];
} eg_error;

/* A dense, row-major view of memory the caller owns. `shape[0]` is the row axis
 * that padding logics act on. `ndim == 0` is a scalar holding one element. */
typedef struct eg_tensor {
  void* data;
  int32_t dtype;  /* eg_dtype */
  int32_t device; /* eg_device_type */
  int32_t ndim;
  int32_t reserved; /* zero */
  int64_t shape[EG_MAX_DIMS];
} eg_tensor;

/* A key/value pair of the plugin's configuration (its TOML table, flattened:
 * nested keys joined by '.', arrays as "[a, b]"). Strings are UTF-8. */
typedef struct eg_config_entry {
  const char* key;
  const char* value;
} eg_config_entry;

/* ---------------------------------------------------------------- host services */

/* Services the runtime lends to a plugin. Valid until the plugin's library is
 * unloaded (the runtime never unloads while instances live). */
typedef struct eg_host_api {
  uint32_t abi_major;   /* EG_ABI_VERSION_MAJOR of the runtime */
  uint32_t abi_minor;   /* EG_ABI_VERSION_MINOR of the runtime */
  uint32_t struct_size; /* sizeof(eg_host_api) as the runtime compiled it */
  uint32_t reserved;
  void* host_context; /* passed back to every service */
  /* Log one message on behalf of `plugin` (its name). Thread-safe. */
  void (*log)(void* host_context, int32_t level, const char* plugin, const char* message);
  /* 1.1: the sizes of the structs the runtime passes by pointer that carry no
   * struct_size of their own, as the runtime compiled them. Read these only when
   * `struct_size` covers them; otherwise the runtime is 1.0 and the sizes are
   * EG_ITEM_DESC_V1_0_SIZE and EG_ITEM_SPEC_V1_0_SIZE. A plugin reads an
   * eg_item_desc field, and writes an eg_item_spec field, only inside them
   * (eg_host_struct_size below does the check). */
  uint32_t item_desc_size;
  uint32_t item_spec_size;
  /* 1.3: the value of a tuning option the user set for plugins ([plugin.tuning]
   * in the host's config; docs/config.md lists the keys: "cpu_threads",
   * "cache_dir"), or NULL when it is not set. The runtime checks the values
   * before any plugin sees them. Process-wide: the values of the config that
   * made the newest runtime in this process. The string stays valid until the
   * library is unloaded. Read it only when `struct_size` covers it
   * (eg_host_tuning_option below does the check); a NULL function, or an older
   * runtime, has no options set. */
  const char* (*tuning_option)(void* host_context, const char* key);
} eg_host_api;

/* ------------------------------------------------------------ model description */

typedef struct eg_path_info {
  const char* name;          /* e.g. "default", "global", "local" */
  int64_t min_token_budget;  /* 0: use the runtime's budgets as they are */
  int32_t allow_zero_tokens; /* nonzero: a batch may send no tokens to this path */
  int32_t reserved;
} eg_path_info;

typedef struct eg_capture_axis {
  const char* name;
  int32_t num_keys; /* at least 1 */
  int32_t reserved;
  const int64_t* keys; /* num_keys discrete values */
} eg_capture_axis;

/* A named input buffer of the graph. The runtime allocates it with the shape
 * `buffer_shape` gives for each budget; the plugin fills its values. */
typedef struct eg_buffer_info {
  const char* name;
  int32_t dtype;         /* eg_dtype */
  int32_t padding_logic; /* eg_padding_logic */
} eg_buffer_info;

/* 1.1: one named output of the forward. Every item gets `rows_per_item` rows of
 * `width` columns of each output (0: the item's output_tokens rows). */
typedef struct eg_output_info {
  const char* name; /* [A-Za-z0-9_.-], unique among the outputs, e.g. "deepstack_0" */
  int64_t width;    /* columns of each row */
  int32_t dtype;    /* eg_dtype */
  int32_t reserved;
  int64_t rows_per_item; /* 0: output_tokens of the item; > 0: that many for every item */
} eg_output_info;

/* What an instance is, fixed after `create`. Pointers stay valid while the
 * instance lives. */
typedef struct eg_model_info {
  uint32_t struct_size;
  uint32_t reserved;
  int64_t out_hidden_size;      /* columns of each output row */
  int32_t out_dtype;            /* eg_dtype of the output rows */
  int32_t max_frames_per_video; /* for max_frames_per_batch; 0 if no video */
  int32_t num_paths;            /* 1..EG_MAX_PATHS */
  int32_t num_capture_axes;     /* 0..EG_MAX_CAPTURE_AXES; only with one path */
  int32_t num_buffers;          /* 0..EG_MAX_BUFFERS, per path the same list */
  int32_t reserved2;
  eg_path_info paths[EG_MAX_PATHS];
  eg_capture_axis capture_axes[EG_MAX_CAPTURE_AXES];
  eg_buffer_info buffers[EG_MAX_BUFFERS];
  /* ---- 1.1 (written only when struct_size covers them) ---- */
  /* Named outputs of every forward. 0 (a 1.0 plugin): one output, "embeddings",
   * of out_hidden_size columns of out_dtype, output_tokens rows per item. Else
   * 1..EG_MAX_OUTPUTS; outputs[0] is the primary output and must match
   * out_hidden_size, out_dtype and rows_per_item 0. */
  int32_t num_outputs;
  int32_t reserved3;
  eg_output_info outputs[EG_MAX_OUTPUTS];
  /* What path p's token budgets and path_tokens[p] count, e.g. "patches" or
   * "merged tokens" (NULL: "tokens"). Shown in plans, reports and errors. */
  const char* path_units[EG_MAX_PATHS];
} eg_model_info;

/* Sizes of one item, as the plugin counts them. */
typedef struct eg_item_spec {
  int64_t input_size;    /* work, in any unit the plugin keeps consistent: balances ranks */
  int64_t output_tokens; /* rows of this item's primary output */
  int64_t frames;        /* frames (1 for an image): bounded per batch by max_frames_per_batch */
  /* What this item sends through each path, in that path's unit
   * (eg_model_info.path_units): what the path's token budgets count. A 1.0
   * plugin with one path: the runtime uses output_tokens instead. A 1.1 plugin
   * writes it for every path, one path included. Entries past num_paths are
   * ignored. */
  int64_t path_tokens[EG_MAX_PATHS];
} eg_item_spec;

/* How to make an item: decoded pixels, or (pixels == NULL) a synthetic item of
 * this geometry whose values are drawn from `seed`. */
typedef struct eg_item_desc {
  int32_t modality; /* eg_modality */
  int32_t channels; /* channels of `pixels` (3 for RGB) */
  int64_t height;
  int64_t width;
  int64_t frames;        /* 1 for an image */
  const uint8_t* pixels; /* frames x height x width x channels, or NULL */
  uint64_t seed;
} eg_item_desc;

/* Opaque plugin-owned objects. */
typedef struct eg_instance eg_instance;
typedef struct eg_item eg_item;

/* Arguments of one instance's creation. */
typedef struct eg_create_params {
  uint32_t struct_size;
  int32_t device;       /* eg_device_type the instance computes on */
  int32_t device_index; /* CUDA ordinal */
  int32_t reserved;
  const char* weights; /* a path, or "random"; NULL means the plugin's default */
  const eg_config_entry* config;
  int64_t num_config;
} eg_create_params;

/* A batch geometry the runtime asks about: the graph key. */
typedef struct eg_graph_shape {
  int32_t path; /* index into eg_model_info.paths */
  int32_t num_axis_keys;
  int64_t token_budget;
  int64_t max_batch_size;
  int64_t max_frames_per_batch;
  int64_t axis_keys[EG_MAX_CAPTURE_AXES];
} eg_graph_shape;

/* Everything `forward` may touch. All memory is the runtime's and stays at the
 * same address for every replay of one graph. */
typedef struct eg_forward_args {
  eg_graph_shape shape;
  const eg_tensor* buffers; /* model_info.num_buffers, in declared order */
  int32_t num_buffers;
  /* 1.1: sizeof(eg_forward_args) as the runtime compiled it; a 1.0 runtime
   * writes 0 here (its `reserved`), meaning EG_FORWARD_ARGS_V1_0_SIZE. */
  uint32_t struct_size;
  eg_tensor output; /* output_shape(shape): the primary output, outputs[0] */
  void* workspace;  /* at least workspace_size(shape) bytes, 256-aligned */
  size_t workspace_size;
  void* stream; /* cudaStream_t for CUDA; NULL on the CPU */
  /* ---- 1.1 ---- */
  const eg_tensor* outputs; /* num_outputs tensors, outputs[0] == output */
  int32_t num_outputs;      /* model_info's (1 for a plugin declaring none) */
  int32_t reserved2;
} eg_forward_args;

/* Staging the plugin writes one batch's real values into before a replay. */
typedef struct eg_replay_buffer {
  eg_tensor staging; /* host memory shaped like the captured buffer */
  int64_t rows;      /* out: leading rows written; -1: not written (docs/plugin-abi.md §9) */
} eg_replay_buffer;

/* ------------------------------------------------------------ the plugin table */

/* 1.4: what a plugin promises beyond the base contract (eg_plugin_api.flags). */
typedef enum eg_plugin_flag {
  /* item_create, item_spec and item_destroy may run on several threads at once
   * on one instance (never while any other function runs on it). The runtime
   * then makes a batch's items in parallel (runtime.item_threads). */
  EG_PLUGIN_CONCURRENT_ITEMS = 1u << 0
} eg_plugin_flag;

/* Every function may be called from any thread, but the runtime never calls into
 * one instance from two threads at once, except as a flag allows. Functions
 * marked (optional) may be NULL; the rest are required and checked at load time. */
typedef struct eg_plugin_api {
  uint32_t abi_major;   /* EG_ABI_VERSION_MAJOR the plugin was built with */
  uint32_t abi_minor;   /* EG_ABI_VERSION_MINOR the plugin was built with */
  uint32_t struct_size; /* sizeof(eg_plugin_api) as the plugin compiled it */
  uint32_t reserved;

  const char* name;        /* unique, [A-Za-z0-9_.-] only */
  const char* version;     /* the plugin's own version, free form */
  const char* description; /* one line */
  uint32_t modalities;     /* bit set of eg_modality */
  uint32_t devices;        /* bit set of eg_device_type */

  /* Create an instance: parse config, load or draw weights, upload them. */
  eg_status (*create)(const eg_create_params* params, eg_instance** out, eg_error* err);
  /* Destroy an instance and everything it owns. Never fails. */
  void (*destroy)(eg_instance* instance);
  /* Describe the instance (paths, buffers, axes, output). */
  eg_status (*model_info)(eg_instance* instance, eg_model_info* out, eg_error* err);
  /* Smallest and largest useful token budget (for automatic planning). */
  eg_status (*budget_range)(eg_instance* instance, int64_t* min_budget, int64_t* max_budget,
                            eg_error* err);

  /* Make an item from pixels or a synthetic description; the item is the
   * plugin's and lives until `item_destroy`. */
  eg_status (*item_create)(eg_instance* instance, const eg_item_desc* desc, eg_item** out,
                           eg_error* err);
  void (*item_destroy)(eg_instance* instance, eg_item* item);
  /* Sizes of an item. */
  eg_status (*item_spec)(eg_instance* instance, const eg_item* item, eg_item_spec* out,
                         eg_error* err);
  /* (optional) The capture-axis keys a batch of these items runs under, one per
   * axis. Required when the model declares capture axes. */
  eg_status (*select_axis_keys)(eg_instance* instance, const eg_item* const* items,
                                int64_t num_items, int64_t* axis_keys, eg_error* err);

  /* Shape of input buffer `index` for a graph (rows first). */
  eg_status (*buffer_shape)(eg_instance* instance, const eg_graph_shape* shape, int32_t index,
                            eg_tensor* out_shape, eg_error* err);
  /* Shape of the output for a graph: [rows, out_hidden_size]. */
  eg_status (*output_shape)(eg_instance* instance, const eg_graph_shape* shape,
                            eg_tensor* out_shape, eg_error* err);
  /* Bytes of scratch the forward needs for this graph. */
  eg_status (*workspace_size)(eg_instance* instance, const eg_graph_shape* shape, size_t* bytes,
                              eg_error* err);

  /* Fill the buffers with valid dummy values for warm-up and capture (buffers
   * are the runtime's, on the instance's device). */
  eg_status (*prepare_capture_inputs)(eg_instance* instance, const eg_graph_shape* shape,
                                      const eg_tensor* buffers, int32_t num_buffers, void* stream,
                                      eg_error* err);
  /* Write a batch's real values into host staging, one per buffer; the runtime
   * then copies them and pads the rest with each buffer's padding logic. */
  eg_status (*prepare_replay_buffers)(eg_instance* instance, const eg_graph_shape* shape,
                                      const eg_item* const* items, int64_t num_items,
                                      eg_replay_buffer* buffers, int32_t num_buffers,
                                      eg_error* err);
  /* (optional) Fill `dst` past `rows` for EG_PAD_CALLBACK buffers. */
  eg_status (*pad_buffer)(eg_instance* instance, int32_t index, const eg_tensor* dst, int64_t rows,
                          void* stream, eg_error* err);

  /* The graph-safe forward: reads buffers, writes output, uses only the given
   * workspace and stream. Captured once per graph, then replayed. */
  eg_status (*forward)(eg_instance* instance, const eg_forward_args* args, eg_error* err);
  /* (optional) A forward run outside any graph, with shape.token_budget equal
   * to the batch's real tokens. NULL: the runtime calls `forward` instead. */
  eg_status (*forward_eager)(eg_instance* instance, const eg_forward_args* args, eg_error* err);

  /* (optional) Copy a batch's output rows into each item's result, in batch
   * order. `outputs` has one tensor per path (data NULL for an unused path);
   * `results[i]` is item i's destination, [output_tokens, out_hidden_size], on
   * the same device. NULL: the runtime copies consecutive rows of path 0. */
  eg_status (*postprocess)(eg_instance* instance, const eg_tensor* outputs, int32_t num_paths,
                           const eg_item* const* items, int64_t num_items, const eg_tensor* results,
                           void* stream, eg_error* err);

  /* (optional) Called once before the first capture, on the runtime's stream:
   * create library handles, load kernels, warm caches. Not captured. */
  eg_status (*prepare_device)(eg_instance* instance, void* stream, eg_error* err);

  /* ---- 1.1 (all optional; a table shorter than EG_PLUGIN_API_V1_1_SIZE lacks them) ---- */

  /* Host-staged capture inputs: write valid dummy values for warm-up and capture
   * into host staging, exactly as prepare_replay_buffers writes a batch (rows
   * out; -1 leaves the buffer zero). The runtime copies and pads them with each
   * buffer's padding logic, so the plugin's capture path holds no device calls.
   * When set, prepare_capture_inputs is never called and may be NULL. */
  eg_status (*prepare_capture_staging)(eg_instance* instance, const eg_graph_shape* shape,
                                       eg_replay_buffer* buffers, int32_t num_buffers,
                                       eg_error* err);
  /* Shape of named output `index` (0 <= index < num_outputs) for a graph:
   * [rows, outputs[index].width]. Required when num_outputs > 1; index 0 must
   * agree with output_shape. */
  eg_status (*output_shape_at)(eg_instance* instance, const eg_graph_shape* shape, int32_t index,
                               eg_tensor* out_shape, eg_error* err);
  /* Post-processing with several outputs. `outputs[p * num_outputs + o]` is
   * output o of path p (data NULL for a path the batch did not use);
   * `results[o * num_items + i]` is item i's destination for output o,
   * [rows_o(item i), outputs[o].width]. When set, it is called instead of
   * `postprocess`. NULL with no `postprocess`: the runtime copies, for each
   * output, consecutive rows of path 0's output, item after item. */
  eg_status (*postprocess_outputs)(eg_instance* instance, const eg_tensor* outputs,
                                   int32_t num_paths, int32_t num_outputs,
                                   const eg_item* const* items, int64_t num_items,
                                   const eg_tensor* results, void* stream, eg_error* err);

  /* ---- 1.2 (optional; a table shorter than EG_PLUGIN_API_V1_2_SIZE lacks it) ---- */

  /* (optional) The spec item_create would give an item of this description,
   * without making it: desc->pixels is ignored (may be NULL); geometry, modality,
   * frames and channels count. Lets the runtime balance items over ranks before
   * any pixels are decoded. Must equal item_spec of the item item_create makes
   * from the same description, and fail where item_create would fail on the
   * geometry. NULL: the runtime makes a synthetic item (pixels NULL) and reads
   * its spec. */
  eg_status (*item_spec_for_desc)(eg_instance* instance, const eg_item_desc* desc,
                                  eg_item_spec* out, eg_error* err);

  /* ---- 1.4 (a table shorter than EG_PLUGIN_API_V1_4_SIZE has no flags) ---- */

  uint64_t flags; /* bit set of eg_plugin_flag; unknown bits are ignored */
} eg_plugin_api;

/* The entry point's type. Returns NULL (after logging through `host`) when the
 * plugin cannot serve this runtime. The table is static and outlives all calls. */
typedef const eg_plugin_api* (*eg_plugin_entry_fn)(const eg_host_api* host);

/* --------------------------------------------------------- frozen layout (v1.0) */

#if defined(__cplusplus) && __cplusplus >= 201103L
#define EG_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define EG_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#else
#define EG_STATIC_ASSERT_JOIN2(a, b) a##b
#define EG_STATIC_ASSERT_JOIN(a, b) EG_STATIC_ASSERT_JOIN2(a, b)
#define EG_STATIC_ASSERT(cond, msg) \
  typedef char EG_STATIC_ASSERT_JOIN(eg_static_assert_, __LINE__)[(cond) ? 1 : -1]
#endif

#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu /* the layout is frozen for 64-bit targets */
EG_STATIC_ASSERT(sizeof(eg_tensor) == 72, "eg_tensor layout is frozen");
EG_STATIC_ASSERT(offsetof(eg_tensor, shape) == 24, "eg_tensor layout is frozen");
EG_STATIC_ASSERT(sizeof(eg_error) == EG_ERROR_MESSAGE_CAPACITY, "eg_error is frozen");
EG_STATIC_ASSERT(offsetof(eg_host_api, log) == 24, "eg_host_api v1.0 is frozen");
EG_STATIC_ASSERT(sizeof(eg_item_spec) == 56, "eg_item_spec is frozen");
EG_STATIC_ASSERT(sizeof(eg_graph_shape) == 64, "eg_graph_shape is frozen");
EG_STATIC_ASSERT(offsetof(eg_model_info, paths) == 40, "eg_model_info is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, name) == 16, "eg_plugin_api v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, create) == 48, "eg_plugin_api v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, forward) == 160, "eg_plugin_api v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, prepare_device) == 184, "eg_plugin_api v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, prepare_capture_staging) == 192,
                 "eg_plugin_api v1.0 is frozen");
/* Every struct, pinned (v1.0 sizes and the offsets v1.1 appends at). */
EG_STATIC_ASSERT(sizeof(eg_config_entry) == 16, "eg_config_entry is frozen");
EG_STATIC_ASSERT(sizeof(eg_path_info) == 24, "eg_path_info is frozen");
EG_STATIC_ASSERT(sizeof(eg_capture_axis) == 24, "eg_capture_axis is frozen");
EG_STATIC_ASSERT(sizeof(eg_buffer_info) == 16, "eg_buffer_info is frozen");
EG_STATIC_ASSERT(sizeof(eg_replay_buffer) == 80, "eg_replay_buffer is frozen");
EG_STATIC_ASSERT(sizeof(eg_item_desc) == 48, "eg_item_desc v1.0 is frozen");
EG_STATIC_ASSERT(sizeof(eg_create_params) == 40, "eg_create_params v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_create_params, num_config) == 32, "eg_create_params is frozen");
EG_STATIC_ASSERT(offsetof(eg_model_info, buffers) == 232, "eg_model_info v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_forward_args, output) == 80, "eg_forward_args v1.0 is frozen");
EG_STATIC_ASSERT(offsetof(eg_forward_args, stream) == 168, "eg_forward_args v1.0 is frozen");
/* v1.1 */
EG_STATIC_ASSERT(sizeof(eg_output_info) == 32, "eg_output_info v1.1 is frozen");
EG_STATIC_ASSERT(offsetof(eg_host_api, item_desc_size) == 32, "eg_host_api v1.1 is frozen");
EG_STATIC_ASSERT(offsetof(eg_model_info, num_outputs) == 488, "eg_model_info v1.1 is frozen");
EG_STATIC_ASSERT(offsetof(eg_model_info, outputs) == 496, "eg_model_info v1.1 is frozen");
EG_STATIC_ASSERT(sizeof(eg_model_info) == 784, "eg_model_info v1.1 is frozen");
EG_STATIC_ASSERT(offsetof(eg_forward_args, outputs) == 176, "eg_forward_args v1.1 is frozen");
EG_STATIC_ASSERT(sizeof(eg_forward_args) == 192, "eg_forward_args v1.1 is frozen");
EG_STATIC_ASSERT(offsetof(eg_plugin_api, postprocess_outputs) == 208,
                 "eg_plugin_api v1.1 is frozen");
/* v1.2 */
EG_STATIC_ASSERT(offsetof(eg_plugin_api, item_spec_for_desc) == 216,
                 "eg_plugin_api v1.2 is frozen");
/* v1.3 */
EG_STATIC_ASSERT(offsetof(eg_host_api, tuning_option) == 40, "eg_host_api v1.3 is frozen");
EG_STATIC_ASSERT(sizeof(eg_host_api) == 48, "eg_host_api v1.3 is frozen");
/* v1.4 */
EG_STATIC_ASSERT(offsetof(eg_plugin_api, flags) == 224, "eg_plugin_api v1.4 is frozen");
EG_STATIC_ASSERT(sizeof(eg_plugin_api) == 232, "eg_plugin_api v1.4 is frozen");
#endif

/* Offsets just past the last field of each minor. V1_0 is the smallest table a
 * v1 runtime accepts; later minors add fields after it. */
#define EG_PLUGIN_API_V1_0_SIZE 192u
#define EG_PLUGIN_API_V1_1_SIZE 216u
#define EG_PLUGIN_API_V1_2_SIZE 224u /* 1.3 added no plugin-table field */
#define EG_PLUGIN_API_V1_4_SIZE 232u
#define EG_HOST_API_V1_0_SIZE 32u
#define EG_HOST_API_V1_1_SIZE 40u
#define EG_MODEL_INFO_V1_0_SIZE 488u
#define EG_FORWARD_ARGS_V1_0_SIZE 176u
#define EG_ITEM_DESC_V1_0_SIZE 48u
#define EG_ITEM_SPEC_V1_0_SIZE 56u

/* Whether a struct of `struct_size` bytes holds the field ending at byte `end`
 * (use EG_HAS_FIELD below). */
#define EG_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))
#define EG_HAS_FIELD(struct_size, type, field) ((size_t)(struct_size) >= EG_FIELD_END(type, field))

/* 1.1: the size the runtime gives an eg_item_desc / eg_item_spec (`which` is
 * 0 for eg_item_desc, 1 for eg_item_spec): the host's when it says, else 1.0's. */
static inline size_t eg_host_struct_size(const eg_host_api* host, int which) {
  if (host && EG_HAS_FIELD(host->struct_size, eg_host_api, item_spec_size))
    return which == 0 ? host->item_desc_size : host->item_spec_size;
  return which == 0 ? EG_ITEM_DESC_V1_0_SIZE : EG_ITEM_SPEC_V1_0_SIZE;
}

/* 1.3: the runtime's value of tuning option `key`, or NULL (not set, or a
 * runtime older than 1.3). */
static inline const char* eg_host_tuning_option(const eg_host_api* host, const char* key) {
  if (host && EG_HAS_FIELD(host->struct_size, eg_host_api, tuning_option) && host->tuning_option)
    return host->tuning_option(host->host_context, key);
  return NULL;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ENCGRAPH_PLUGIN_API_H */
