// One small plugin built many times by tests/loader/CMakeLists.txt. Without
// scenario macros it is a complete, working CPU plugin (out = 2 * x + 1 per row);
// each macro breaks exactly one thing, so every loader check has a plugin that
// trips it and nothing else.
//   TP_NAME               plugin name (required)
//   TP_VERSION            plugin version (default "1.2.3")
//   TP_ABI_MAJOR          abi_major in the table (default: this header's)
//   TP_STRUCT_SIZE        struct_size in the table (default: sizeof(eg_plugin_api))
//   TP_ABI_MINOR          abi_minor in the table (default: this header's)
//   TP_GARBAGE_TAIL       the 1.1 entries hold garbage (a 1.0 table's struct_size ends before them)
//   TP_STAGING            host-staged capture inputs (1.1), prepare_capture_inputs NULL
//   TP_NO_CAPTURE_INPUTS  neither prepare_capture_inputs nor prepare_capture_staging
//   TP_NO_FORWARD         the required `forward` is NULL
//   TP_CREATE_THROWS      `create` lets a C++ exception escape
//   TP_ENTRY_THROWS       the entry function lets a C++ exception escape
//   TP_ENTRY_RETURNS_NULL the entry function declines the runtime
//   TP_CTOR_ABORTS        a static constructor calls abort() when the library loads
//   TP_CTOR_EXITS         a static constructor calls _exit(7) when the library loads
//   TP_ENTRY_SEGFAULTS    the entry function writes through a bad pointer
//   TP_ENTRY_HANGS        the entry function never returns
//   TP_ENTRY_GARBAGE      the entry function returns a pointer to no table
//   TP_NAME_GARBAGE       the table's name points nowhere
//   TP_CTOR_CANARY        a static constructor appends a line to $LOADER_TEST_CANARY
#include <encgraph/plugin_api.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

#ifndef TP_NAME
#error "TP_NAME must name the plugin"
#endif
#ifndef TP_VERSION
#define TP_VERSION "1.2.3"
#endif
#ifndef TP_ABI_MAJOR
#define TP_ABI_MAJOR EG_ABI_VERSION_MAJOR
#endif
#ifndef TP_ABI_MINOR
#define TP_ABI_MINOR EG_ABI_VERSION_MINOR
#endif
#ifndef TP_STRUCT_SIZE
#define TP_STRUCT_SIZE sizeof(eg_plugin_api)
#endif

// From plugins/helper.c, a static library of default visibility.
extern "C" int loader_test_helper_one(void);

namespace {

constexpr int64_t kHidden = 4;
const eg_host_api* g_host = nullptr;

struct Instance {
  eg_model_info info{};
};

struct Item {
  int64_t rows = 0;
  std::vector<float> x;  // rows x kHidden
};

// Not derived from std::exception, so only a catch (...) in the core stops it.
struct NotAStdException {
  int code;
};

void set_error(eg_error* err, const char* message) {
  if (err) std::snprintf(err->message, sizeof(err->message), "%s", message);
}

// Every exported body that should behave runs inside this.
template <class Fn>
eg_status guarded(eg_error* err, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    set_error(err, "out of host memory");
    return EG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(err, e.what());
    return EG_ERR_INTERNAL;
  } catch (...) {
    set_error(err, "unknown exception");
    return EG_ERR_INTERNAL;
  }
}

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}
const Item& item_of(const eg_item* i) {
  return *reinterpret_cast<const Item*>(i);
}

eg_status tp_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
#ifdef TP_CREATE_THROWS
  (void)p;
  (void)out;
  (void)err;
  throw NotAStdException{42};  // the ABI violation under test
#else
  return guarded(err, [&] {
    if (p->device != EG_DEVICE_CPU) {
      set_error(err, "this test plugin runs on the CPU only");
      return EG_ERR_UNSUPPORTED;
    }
    if (p->num_config > 0) {
      set_error(err, "this test plugin takes no configuration");
      return EG_ERR_INVALID_ARGUMENT;
    }
    auto* in = new Instance();
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = kHidden;
    mi.out_dtype = EG_DTYPE_F32;
    mi.num_paths = 1;
    mi.paths[0].name = "default";
    mi.num_buffers = 1;
    mi.buffers[0].name = "x";
    mi.buffers[0].dtype = EG_DTYPE_F32;
    mi.buffers[0].padding_logic = EG_PAD_ZERO;
    *out = reinterpret_cast<eg_instance*>(in);
    return EG_OK;
  });
#endif
}

void tp_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status tp_model_info(eg_instance* i, eg_model_info* out, eg_error*) {
  *out = self(i).info;
  return EG_OK;
}

eg_status tp_budget_range(eg_instance*, int64_t* lo, int64_t* hi, eg_error*) {
  *lo = 4 * loader_test_helper_one();
  *hi = 16;
  return EG_OK;
}

// An item of `height` rows; row r, column d holds seed + r + d / 10.
eg_status tp_item_create(eg_instance*, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    if (d->height <= 0) {
      set_error(err, "height must be positive");
      return EG_ERR_INVALID_ARGUMENT;
    }
    auto* it = new Item();
    it->rows = d->height;
    it->x.resize(static_cast<size_t>(it->rows * kHidden));
    for (int64_t r = 0; r < it->rows; ++r)
      for (int64_t c = 0; c < kHidden; ++c)
        it->x[r * kHidden + c] =
            static_cast<float>(d->seed) + static_cast<float>(r) + static_cast<float>(c) / 10.0f;
    *out = reinterpret_cast<eg_item*>(it);
    return EG_OK;
  });
}

void tp_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<Item*>(item);
}

eg_status tp_item_spec(eg_instance*, const eg_item* item, eg_item_spec* out, eg_error*) {
  *out = eg_item_spec{};
  out->input_size = item_of(item).rows;
  out->output_tokens = item_of(item).rows;
  out->frames = 1;
  out->path_tokens[0] = item_of(item).rows;
  return EG_OK;
}

eg_status tp_rows_shape(const eg_graph_shape* s, eg_tensor* out) {
  *out = eg_tensor{};
  out->ndim = 2;
  out->shape[0] = s->token_budget;
  out->shape[1] = kHidden;
  return EG_OK;
}

eg_status tp_buffer_shape(eg_instance*, const eg_graph_shape* s, int32_t, eg_tensor* out,
                          eg_error*) {
  return tp_rows_shape(s, out);
}

eg_status tp_output_shape(eg_instance*, const eg_graph_shape* s, eg_tensor* out, eg_error*) {
  return tp_rows_shape(s, out);
}

eg_status tp_workspace_size(eg_instance*, const eg_graph_shape*, size_t* bytes, eg_error*) {
  *bytes = 0;
  return EG_OK;
}

[[maybe_unused]] eg_status tp_prepare_capture_inputs(eg_instance*, const eg_graph_shape* s,
                                                     const eg_tensor* buffers, int32_t, void*,
                                                     eg_error*) {
  std::memset(buffers[0].data, 0, static_cast<size_t>(s->token_budget * kHidden) * 4);
  return EG_OK;
}

// The host-staged variant: the rows the capture replays are zero (-1: the
// runtime leaves the buffer zero).
[[maybe_unused]] eg_status tp_prepare_capture_staging(eg_instance*, const eg_graph_shape*,
                                                      eg_replay_buffer* bufs, int32_t n,
                                                      eg_error*) {
  for (int32_t b = 0; b < n; ++b) bufs[b].rows = -1;
  return EG_OK;
}

eg_status tp_prepare_replay_buffers(eg_instance*, const eg_graph_shape*,
                                    const eg_item* const* items, int64_t n, eg_replay_buffer* bufs,
                                    int32_t, eg_error* err) {
  float* x = static_cast<float*>(bufs[0].staging.data);
  int64_t row = 0;
  for (int64_t k = 0; k < n; ++k) {
    const Item& it = item_of(items[k]);
    if (row + it.rows > bufs[0].staging.shape[0]) {
      set_error(err, "batch larger than the budget");
      return EG_ERR_INVALID_ARGUMENT;
    }
    std::memcpy(x + row * kHidden, it.x.data(), it.x.size() * sizeof(float));
    row += it.rows;
  }
  bufs[0].rows = row;
  return EG_OK;
}

[[maybe_unused]] eg_status tp_forward(eg_instance*, const eg_forward_args* a, eg_error*) {
  const float* x = static_cast<const float*>(a->buffers[0].data);
  float* out = static_cast<float*>(a->output.data);
  for (int64_t k = 0; k < a->shape.token_budget * kHidden; ++k) out[k] = 2.0f * x[k] + 1.0f;
  return EG_OK;
}

[[maybe_unused]] const eg_plugin_api kApi = {
    /* .abi_major = */ TP_ABI_MAJOR,
    /* .abi_minor = */ TP_ABI_MINOR,
    /* .struct_size = */ TP_STRUCT_SIZE,
    /* .reserved = */ 0,
#ifdef TP_NAME_GARBAGE
    /* .name = */ reinterpret_cast<const char*>(uintptr_t{24}),
#else
    /* .name = */ TP_NAME,
#endif
    /* .version = */ TP_VERSION,
    /* .description = */ "loader test plugin",
    /* .modalities = */ EG_MODALITY_IMAGE,
    /* .devices = */ EG_DEVICE_CPU,
    /* .create = */ tp_create,
    /* .destroy = */ tp_destroy,
    /* .model_info = */ tp_model_info,
    /* .budget_range = */ tp_budget_range,
    /* .item_create = */ tp_item_create,
    /* .item_destroy = */ tp_item_destroy,
    /* .item_spec = */ tp_item_spec,
    /* .select_axis_keys = */ nullptr,
    /* .buffer_shape = */ tp_buffer_shape,
    /* .output_shape = */ tp_output_shape,
    /* .workspace_size = */ tp_workspace_size,
#if defined(TP_STAGING) || defined(TP_NO_CAPTURE_INPUTS)
    /* .prepare_capture_inputs = */ nullptr,
#else
    /* .prepare_capture_inputs = */ tp_prepare_capture_inputs,
#endif
    /* .prepare_replay_buffers = */ tp_prepare_replay_buffers,
    /* .pad_buffer = */ nullptr,
#ifdef TP_NO_FORWARD
    /* .forward = */ nullptr,
#else
    /* .forward = */ tp_forward,
#endif
    /* .forward_eager = */ nullptr,
    /* .postprocess = */ nullptr,
    /* .prepare_device = */ nullptr,
#if defined(TP_GARBAGE_TAIL)  // past a 1.0 struct_size: must never be read or called
    /* .prepare_capture_staging = */
    reinterpret_cast<decltype(eg_plugin_api::prepare_capture_staging)>(uintptr_t{24}),
    /* .output_shape_at = */
    reinterpret_cast<decltype(eg_plugin_api::output_shape_at)>(uintptr_t{24}),
    /* .postprocess_outputs = */
    reinterpret_cast<decltype(eg_plugin_api::postprocess_outputs)>(uintptr_t{24}),
#elif defined(TP_STAGING)
    /* .prepare_capture_staging = */ tp_prepare_capture_staging,
    /* .output_shape_at = */ nullptr,
    /* .postprocess_outputs = */ nullptr,
#else
    /* .prepare_capture_staging = */ nullptr,
    /* .output_shape_at = */ nullptr,
    /* .postprocess_outputs = */ nullptr,
#endif
#if defined(TP_GARBAGE_TAIL) || defined(TP_GARBAGE_1_2)  // past a 1.0 / 1.1 struct_size
    /* .item_spec_for_desc = */
    reinterpret_cast<decltype(eg_plugin_api::item_spec_for_desc)>(uintptr_t{24}),
    /* .flags = */ EG_PLUGIN_CONCURRENT_ITEMS,  // never read past the short struct_size
#else
    /* .item_spec_for_desc = */ nullptr,
    /* .flags = */ 0,
#endif
};

#if defined(TP_CTOR_ABORTS) || defined(TP_CTOR_EXITS)
// Runs when the library is loaded, before anyone can call the entry.
__attribute__((constructor)) void tp_load_time_failure() {
#ifdef TP_CTOR_ABORTS
  std::abort();
#else
  ::_exit(7);
#endif
}
#endif

#ifdef TP_CTOR_CANARY
// Tells a test each time the library is loaded, in whichever process.
__attribute__((constructor)) void tp_canary() {
  if (const char* path = std::getenv("LOADER_TEST_CANARY"))
    if (FILE* f = std::fopen(path, "a")) {
      std::fputs("loaded\n", f);
      std::fclose(f);
    }
}
#endif

// An address no process maps, through a volatile so no compiler turns it into a trap.
[[maybe_unused]] volatile uintptr_t g_bad_address = 16;

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  g_host = host;
#if defined(TP_ENTRY_THROWS)
  throw NotAStdException{7};  // the ABI violation under test
#elif defined(TP_ENTRY_SEGFAULTS)
  *reinterpret_cast<volatile int*>(g_bad_address) = 1;
  return &kApi;
#elif defined(TP_ENTRY_HANGS)
  for (;;) ::pause();
#elif defined(TP_ENTRY_GARBAGE)
  return reinterpret_cast<const eg_plugin_api*>(g_bad_address);
#elif defined(TP_ENTRY_RETURNS_NULL)
  if (host && host->log)
    host->log(host->host_context, EG_LOG_WARN, TP_NAME, "declining on purpose");
  return nullptr;
#else
  return &kApi;
#endif
}
