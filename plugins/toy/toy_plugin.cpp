// The toy plugin: a small, deliberately position-dependent "encoder" that
// exercises every part of the ABI the budget-graph manager uses, so that a wrong
// order, a wrong slice, a missing padding step or padding leaking into a real
// item changes the result. Built twice from this file: "toy" (one path, default
// post-processing) and "toy_dual" (a global and a local path, own
// post-processing).
//
// Per item: tokens = max(1, (height / patch) * (width / patch)) * frames rows of
// `hidden` values drawn from the item's seed (or taken from its pixels).
// Forward, per sequence s occupying rows [c_s, c_{s+1}):
//   out[r][d] = bias + scale * sum_{c_s <= q <= r} x[q][d] + 0.001 * (r - c_s) + 0.01 * d
// and padded rows are written as 0. `scale` is the batch's capture-axis key (1
// without axes).
#include <encgraph/plugin_api.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef TOY_HAVE_CUDA
#include <cuda_runtime.h>

#include "toy_kernels.hpp"
#endif

#ifdef TOY_DUAL_PATH
#define TOY_NAME "toy_dual"
#else
#define TOY_NAME "toy"
#endif

namespace {

const eg_host_api* g_host = nullptr;

enum Buffer { kX = 0, kCuSeqlens = 1, kNumSeqs = 2, kSeqId = 3, kBias = 4, kNumBuffers = 5 };

struct Config {
  int64_t hidden = 8;
  int64_t patch = 14;
  int64_t min_budget = 64;
  int64_t max_budget = 4096;
  int64_t local_min_tokens = 4;  // toy_dual: items below this skip the local path
  int64_t local_min_budget = 0;  // toy_dual: the local path's minimum budget
  int64_t max_frames_per_video = 8;
  int64_t extra_kernels = 0;        // tiny launches per forward (launch-overhead benchmark)
  int64_t huge_workspace_from = 0;  // budgets >= this ask for an impossible workspace
  int64_t workspace_per_token = 0;  // extra scratch bytes per budget token (memory tests)
  int64_t fail_forward_at = 0;      // forward fails at this budget
  bool illegal_sync = false;        // forward synchronises the device (illegal in capture)
  bool check_padding = true;        // CPU: verify padded rows before computing
  float bias = 0.5f;
  std::vector<int64_t> axis_keys;  // one capture axis "frames" when non-empty
};

struct Instance {
  Config cfg;
  int32_t device = EG_DEVICE_CPU;
  int32_t device_index = 0;
  eg_model_info info{};
  int64_t forwards = 0;
};

struct Item {
  int64_t tokens = 0;
  int64_t frames = 1;
  std::vector<float> x;  // tokens x hidden
};

class ToyError : public std::runtime_error {
 public:
  ToyError(eg_status s, const std::string& m) : std::runtime_error(m), status(s) {}
  eg_status status;
};

void set_error(eg_error* err, const std::string& message) {
  if (!err) return;
  std::snprintf(err->message, sizeof(err->message), "%s", message.c_str());
}

// Every exported body runs inside this: no exception crosses the C boundary.
template <class Fn>
eg_status guarded(eg_error* err, Fn&& fn) {
  try {
    fn();
    return EG_OK;
  } catch (const ToyError& e) {
    set_error(err, e.what());
    return e.status;
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

[[noreturn]] void fail(eg_status s, const std::string& m) {
  throw ToyError(s, m);
}

int64_t parse_int(const char* key, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE)
    fail(EG_ERR_INVALID_ARGUMENT, std::string(TOY_NAME ": config key '") + key + "': '" + value +
                                      "' is not an integer within 64 bits");
  return v;
}

float parse_float(const char* key, const char* value) {
  char* end = nullptr;
  const float v = std::strtof(value, &end);
  if (end == value || *end != '\0' || !std::isfinite(v))
    fail(EG_ERR_INVALID_ARGUMENT, std::string(TOY_NAME ": config key '") + key + "': '" + value +
                                      "' is not a finite number");
  return v;
}

// Bounds that keep every product the plugin computes (budget x hidden,
// workspace_per_token x budget, ...) far inside 64 bits.
void require_in_range(const char* key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    fail(EG_ERR_INVALID_ARGUMENT, std::string(TOY_NAME ": config key '") + key +
                                      "' = " + std::to_string(v) + " is outside [" +
                                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// a * b, or an error naming `what` (sizes computed from items and budgets).
int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(EG_ERR_INVALID_ARGUMENT, std::string(TOY_NAME ": ") + what + " overflows 64 bits (" +
                                      std::to_string(a) + " x " + std::to_string(b) + ")");
  return r;
}

// Values (tokens x hidden) one item may hold: 1 GiB of f32.
constexpr int64_t kMaxItemValues = int64_t{1} << 28;
constexpr int64_t kMaxBudget = int64_t{1} << 30;

bool parse_bool(const char* key, const char* value) {
  const std::string v = value;
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  fail(EG_ERR_INVALID_ARGUMENT,
       std::string("config key '") + key + "': '" + value + "' is not a boolean (true/false)");
}

std::vector<int64_t> parse_int_list(const char* key, const char* value) {
  std::string s = value;
  std::vector<int64_t> out;
  std::string cur;
  for (char c : s) {
    if (c == '[' || c == ']' || c == ' ') continue;
    if (c == ',') {
      if (!cur.empty()) out.push_back(parse_int(key, cur.c_str()));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(parse_int(key, cur.c_str()));
  return out;
}

Config parse_config(const eg_create_params* p) {
  Config c;
  for (int64_t i = 0; i < p->num_config; ++i) {
    const char* k = p->config[i].key;
    const char* v = p->config[i].value;
    const std::string key = k;
    if (key == "hidden")
      c.hidden = parse_int(k, v);
    else if (key == "patch")
      c.patch = parse_int(k, v);
    else if (key == "min_budget")
      c.min_budget = parse_int(k, v);
    else if (key == "max_budget")
      c.max_budget = parse_int(k, v);
    else if (key == "local_min_tokens")
      c.local_min_tokens = parse_int(k, v);
    else if (key == "local_min_budget")
      c.local_min_budget = parse_int(k, v);
    else if (key == "max_frames_per_video")
      c.max_frames_per_video = parse_int(k, v);
    else if (key == "extra_kernels")
      c.extra_kernels = parse_int(k, v);
    else if (key == "huge_workspace_from")
      c.huge_workspace_from = parse_int(k, v);
    else if (key == "workspace_per_token")
      c.workspace_per_token = parse_int(k, v);
    else if (key == "fail_forward_at")
      c.fail_forward_at = parse_int(k, v);
    else if (key == "illegal_sync")
      c.illegal_sync = parse_bool(k, v);
    else if (key == "check_padding")
      c.check_padding = parse_bool(k, v);
    else if (key == "bias")
      c.bias = parse_float(k, v);
    else if (key == "capture_axis_keys")
      c.axis_keys = parse_int_list(k, v);
    else
      fail(
          EG_ERR_INVALID_ARGUMENT,
          "unknown config key '" + key +
              "' for plugin " TOY_NAME
              " (known: hidden, patch, min_budget, max_budget, local_min_tokens, local_min_budget, "
              "max_frames_per_video, extra_kernels, huge_workspace_from, workspace_per_token, "
              "fail_forward_at, "
              "illegal_sync, check_padding, bias, capture_axis_keys)");
  }
  require_in_range("hidden", c.hidden, 1, 65536);
  require_in_range("patch", c.patch, 1, int64_t{1} << 20);
  // Their order and positivity are the runtime's to check (the budget range).
  require_in_range("min_budget", c.min_budget, -kMaxBudget, kMaxBudget);
  require_in_range("max_budget", c.max_budget, -kMaxBudget, kMaxBudget);
  require_in_range("local_min_tokens", c.local_min_tokens, 0, kMaxBudget);
  require_in_range("local_min_budget", c.local_min_budget, 0, kMaxBudget);
  require_in_range("max_frames_per_video", c.max_frames_per_video, 0, 65536);
  require_in_range("extra_kernels", c.extra_kernels, 0, int64_t{1} << 20);
  require_in_range("huge_workspace_from", c.huge_workspace_from, 0, INT64_MAX);
  require_in_range("workspace_per_token", c.workspace_per_token, 0, int64_t{1} << 30);
  require_in_range("fail_forward_at", c.fail_forward_at, 0, INT64_MAX);
  for (int64_t key : c.axis_keys) require_in_range("capture_axis_keys", key, 1, 65536);
  return c;
}

// A small deterministic hash to draw item values from a seed.
float draw(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + a * 0xBF58476D1CE4E5B9ull + b * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
}

bool dual() {
#ifdef TOY_DUAL_PATH
  return true;
#else
  return false;
#endif
}

// Tokens item `it` sends through `path`.
int64_t path_tokens(const Instance& in, const Item& it, int32_t path) {
  if (!dual()) return it.tokens;
  if (path == 0) return 1;  // global: one summary row per item
  return it.tokens >= in.cfg.local_min_tokens ? it.tokens : 0;
}

// Each graph's max sequences: the batch's item count.
int64_t max_seqs(const eg_graph_shape* s) {
  return std::max<int64_t>(s->max_batch_size, 1);
}

float axis_scale(const eg_graph_shape* s) {
  return s->num_axis_keys > 0 ? static_cast<float>(s->axis_keys[0]) : 1.0f;
}

void forward_cpu(const Instance& in, const eg_forward_args* a) {
  const int64_t budget = a->shape.token_budget, hidden = in.cfg.hidden;
  const float* x = static_cast<const float*>(a->buffers[kX].data);
  const int32_t* cu = static_cast<const int32_t*>(a->buffers[kCuSeqlens].data);
  const int32_t n = *static_cast<const int32_t*>(a->buffers[kNumSeqs].data);
  const int32_t* seq_id = static_cast<const int32_t*>(a->buffers[kSeqId].data);
  const float bias = *static_cast<const float*>(a->buffers[kBias].data);
  float* out = static_cast<float*>(a->output.data);
  const int64_t cap = a->buffers[kCuSeqlens].shape[0];
  if (n < 0 || n + 1 > cap) fail(EG_ERR_INVALID_ARGUMENT, "num_seqs out of range");
  const int64_t real_rows = cu[n];
  if (in.cfg.check_padding) {
    for (int64_t k = 1; k < cap; ++k)
      if (cu[k] < cu[k - 1])
        fail(EG_ERR_INTERNAL, "padding check: cu_seqlens decreases at " + std::to_string(k) +
                                  " (repeat-last padding missing)");
    for (int64_t r = real_rows; r < budget; ++r) {
      if (seq_id[r] != -1)
        fail(EG_ERR_INTERNAL, "padding check: seq_id row " + std::to_string(r) +
                                  " is not -1 (callback padding missing)");
      for (int64_t d = 0; d < hidden; ++d)
        if (x[r * hidden + d] != 0.0f)
          fail(EG_ERR_INTERNAL,
               "padding check: x row " + std::to_string(r) + " is not zero (zero padding missing)");
    }
    for (int32_t s = 0; s < n; ++s)
      for (int64_t r = cu[s]; r < cu[s + 1]; ++r)
        if (seq_id[r] != s)
          fail(EG_ERR_INTERNAL, "padding check: seq_id disagrees with cu_seqlens");
  }
  const float scale = axis_scale(&a->shape);
  std::vector<float> acc(hidden);
  for (int32_t s = 0; s < n; ++s) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t r = cu[s]; r < cu[s + 1]; ++r)
      for (int64_t d = 0; d < hidden; ++d) {
        acc[d] += x[r * hidden + d];
        out[r * hidden + d] = bias + scale * acc[d] + 0.001f * static_cast<float>(r - cu[s]) +
                              0.01f * static_cast<float>(d);
      }
  }
  for (int64_t r = std::max<int64_t>(real_rows, 0); r < budget; ++r)
    for (int64_t d = 0; d < hidden; ++d) out[r * hidden + d] = 0.0f;
  volatile float* ws = static_cast<float*>(a->workspace);
  for (int64_t k = 0; k < in.cfg.extra_kernels && ws; ++k) ws[k] = ws[k] + 1.0f;
}

#ifdef TOY_HAVE_CUDA
void check_cuda(cudaError_t st, const char* what) {
  if (st != cudaSuccess) fail(EG_ERR_DEVICE, std::string(what) + ": " + cudaGetErrorString(st));
}
#endif

#ifdef TOY_DUAL_PATH
void copy_rows(const Instance& in, void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  if (in.device == EG_DEVICE_CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef TOY_HAVE_CUDA
  check_cuda(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      "postprocess copy");
#else
  (void)stream;
  fail(EG_ERR_UNSUPPORTED, "built without CUDA");
#endif
}

#endif

// ---------------------------------------------------------------- ABI functions

Instance& self(eg_instance* i) {
  return *reinterpret_cast<Instance*>(i);
}

eg_status toy_create(const eg_create_params* p, eg_instance** out, eg_error* err) {
  return guarded(err, [&] {
    auto in = std::make_unique<Instance>();
    in->cfg = parse_config(p);
    in->device = p->device;
    in->device_index = p->device_index;
#ifdef TOY_HAVE_CUDA
    if (in->device == EG_DEVICE_CUDA) check_cuda(cudaSetDevice(in->device_index), "cudaSetDevice");
#else
    if (in->device == EG_DEVICE_CUDA) fail(EG_ERR_UNSUPPORTED, "built without CUDA");
#endif
    if (p->weights && std::string(p->weights) != "random" && std::string(p->weights) != "none")
      fail(EG_ERR_INVALID_ARGUMENT, std::string("the toy plugin has no weights; got weights = '") +
                                        p->weights + "' (use \"random\" or leave it unset)");
    eg_model_info& mi = in->info;
    mi.struct_size = sizeof(mi);
    mi.out_hidden_size = in->cfg.hidden;
    mi.out_dtype = EG_DTYPE_F32;
    mi.max_frames_per_video = static_cast<int32_t>(in->cfg.max_frames_per_video);
    if (dual()) {
      mi.num_paths = 2;
      mi.paths[0] = {"global", 0, 0, 0};
      mi.paths[1] = {"local", in->cfg.local_min_budget, 1, 0};
    } else {
      mi.num_paths = 1;
      mi.paths[0] = {"default", 0, 0, 0};
    }
    if (!in->cfg.axis_keys.empty()) {
      mi.num_capture_axes = 1;
      mi.capture_axes[0].name = "frames";
      mi.capture_axes[0].num_keys = static_cast<int32_t>(in->cfg.axis_keys.size());
      mi.capture_axes[0].keys = in->cfg.axis_keys.data();
    }
    mi.num_buffers = kNumBuffers;
    mi.buffers[kX] = {"x", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[kCuSeqlens] = {"cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    mi.buffers[kNumSeqs] = {"num_seqs", EG_DTYPE_I32, EG_PAD_ZERO};
    mi.buffers[kSeqId] = {"seq_id", EG_DTYPE_I32, EG_PAD_CALLBACK};
    mi.buffers[kBias] = {"bias", EG_DTYPE_F32, EG_PAD_ZERO};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void toy_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

eg_status toy_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] { *out = self(i).info; });
}

eg_status toy_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] {
    *lo = self(i).cfg.min_budget;
    *hi = self(i).cfg.max_budget;
  });
}

eg_status toy_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (d->height <= 0 || d->width <= 0 || d->frames <= 0)
      fail(EG_ERR_INVALID_ARGUMENT, "item geometry must be positive, got " +
                                        std::to_string(d->height) + "x" + std::to_string(d->width) +
                                        "x" + std::to_string(d->frames));
    if (d->modality == EG_MODALITY_IMAGE && d->frames != 1)
      fail(EG_ERR_INVALID_ARGUMENT, "an image item has exactly one frame");
    auto it = std::make_unique<Item>();
    it->frames = d->frames;
    const int64_t per_frame = std::max<int64_t>(
        1, checked_mul(d->height / in.cfg.patch, d->width / in.cfg.patch, "the item's tokens"));
    it->tokens = checked_mul(per_frame, d->frames, "the item's tokens");
    const int64_t h = in.cfg.hidden;
    const int64_t values = checked_mul(it->tokens, h, "the item's values");
    if (values > kMaxItemValues)
      fail(EG_ERR_INVALID_ARGUMENT,
           TOY_NAME ": item of " + std::to_string(d->height) + "x" + std::to_string(d->width) +
               " x " + std::to_string(d->frames) + " frames has " + std::to_string(it->tokens) +
               " tokens of " + std::to_string(h) + " values, over the limit of " +
               std::to_string(kMaxItemValues) + " values per item (raise patch)");
    it->x.resize(static_cast<size_t>(values));
    const size_t npix =
        d->pixels ? static_cast<size_t>(checked_mul(
                        checked_mul(d->frames, d->height, "the item's pixels"),
                        checked_mul(d->width, std::max(d->channels, 1), "the item's pixels"),
                        "the item's pixels"))
                  : 0;
    for (int64_t t = 0; t < it->tokens; ++t)
      for (int64_t c = 0; c < h; ++c)
        it->x[t * h + c] =
            npix ? d->pixels[static_cast<size_t>(t * h + c) % npix] / 255.0f : draw(d->seed, t, c);
    *out = reinterpret_cast<eg_item*>(it.release());
  });
}

void toy_item_destroy(eg_instance*, eg_item* item) {
  delete reinterpret_cast<Item*>(item);
}

const Item& item_of(const eg_item* i) {
  return *reinterpret_cast<const Item*>(i);
}

eg_status toy_item_spec(eg_instance* i, const eg_item* item, eg_item_spec* out, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const Item& it = item_of(item);
    *out = eg_item_spec{};
    out->input_size = it.tokens;
    out->frames = it.frames;
    if (dual()) {
      out->path_tokens[0] = path_tokens(in, it, 0);
      out->path_tokens[1] = path_tokens(in, it, 1);
      out->output_tokens = out->path_tokens[0] + out->path_tokens[1];
    } else {
      out->output_tokens = it.tokens;
      out->path_tokens[0] = it.tokens;
    }
  });
}

eg_status toy_select_axis_keys(eg_instance* i, const eg_item* const* items, int64_t n,
                               int64_t* keys, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    int64_t frames = 1;
    for (int64_t k = 0; k < n; ++k) frames = std::max(frames, item_of(items[k]).frames);
    // The smallest key that covers the batch's longest video, else the largest key.
    int64_t chosen = in.cfg.axis_keys.back();
    for (int64_t key : in.cfg.axis_keys)
      if (key >= frames) {
        chosen = key;
        break;
      }
    keys[0] = chosen;
  });
}

eg_status toy_buffer_shape(eg_instance* i, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                           eg_error* err) {
  return guarded(err, [&] {
    *out = eg_tensor{};
    switch (index) {
      case kX:
        out->ndim = 2;
        out->shape[0] = s->token_budget;
        out->shape[1] = self(i).cfg.hidden;
        break;
      case kCuSeqlens:
        out->ndim = 1;
        out->shape[0] = max_seqs(s) + 1;
        break;
      case kNumSeqs: out->ndim = 0; break;
      case kSeqId:
        out->ndim = 1;
        out->shape[0] = s->token_budget;
        break;
      case kBias:
        out->ndim = 1;
        out->shape[0] = 1;
        break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "no buffer " + std::to_string(index));
    }
  });
}

eg_status toy_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out, eg_error* err) {
  return guarded(err, [&] {
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = s->token_budget;
    out->shape[1] = self(i).cfg.hidden;
  });
}

eg_status toy_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes,
                             eg_error* err) {
  return guarded(err, [&] {
    const Config& c = self(i).cfg;
    if (c.huge_workspace_from > 0 && s->token_budget >= c.huge_workspace_from)
      *bytes = size_t{1} << 50;  // no machine has this: exercises out-of-memory handling
    else
      *bytes = static_cast<size_t>(c.extra_kernels + 1) * sizeof(float) +
               static_cast<size_t>(
                   checked_mul(c.workspace_per_token, s->token_budget, "the workspace size"));
  });
}

// Host-side values for a batch: shared by capture (synthetic items) and replay.
struct HostBatch {
  std::vector<float> x;
  std::vector<int32_t> cu{0};
  std::vector<int32_t> seq_id;
};

void append_sequence(HostBatch& b, const float* rows, int64_t nrows, int64_t hidden) {
  const int32_t s = static_cast<int32_t>(b.cu.size()) - 1;
  b.x.insert(b.x.end(), rows, rows + nrows * hidden);
  for (int64_t r = 0; r < nrows; ++r) b.seq_id.push_back(s);
  b.cu.push_back(b.cu.back() + static_cast<int32_t>(nrows));
}

eg_status toy_prepare_capture_inputs(eg_instance* i, const eg_graph_shape* s,
                                     const eg_tensor* buffers, int32_t nb, void* stream,
                                     eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (nb != kNumBuffers) fail(EG_ERR_INVALID_ARGUMENT, "expected 5 buffers");
    const int64_t hidden = in.cfg.hidden, budget = s->token_budget;
    // max_batch_size sequences splitting the budget, like a full batch.
    const int64_t seqs = std::min<int64_t>(max_seqs(s), std::max<int64_t>(budget, 1));
    HostBatch b;
    std::vector<float> rows;
    for (int64_t k = 0; k < seqs; ++k) {
      const int64_t n = budget / seqs + (k == seqs - 1 ? budget % seqs : 0);
      rows.resize(static_cast<size_t>(n * hidden));
      for (int64_t r = 0; r < n * hidden; ++r) rows[r] = draw(1234, k, r);
      append_sequence(b, rows.data(), n, hidden);
    }
    const int64_t cap = max_seqs(s) + 1;
    while (static_cast<int64_t>(b.cu.size()) < cap) b.cu.push_back(b.cu.back());
    b.x.resize(static_cast<size_t>(budget * hidden), 0.0f);
    b.seq_id.resize(static_cast<size_t>(budget), -1);
    const int32_t n = static_cast<int32_t>(seqs);
    const float bias = in.cfg.bias;
    struct Copy {
      void* dst;
      const void* src;
      size_t bytes;
    } copies[] = {{buffers[kX].data, b.x.data(), b.x.size() * 4},
                  {buffers[kCuSeqlens].data, b.cu.data(), b.cu.size() * 4},
                  {buffers[kNumSeqs].data, &n, 4},
                  {buffers[kSeqId].data, b.seq_id.data(), b.seq_id.size() * 4},
                  {buffers[kBias].data, &bias, 4}};
    for (const Copy& c : copies) {
      if (in.device == EG_DEVICE_CPU) {
        std::memcpy(c.dst, c.src, c.bytes);
      } else {
#ifdef TOY_HAVE_CUDA
        // Synchronous: the host vectors die at return. Capture preparation is
        // outside any graph, so this is allowed.
        check_cuda(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice,
                                   static_cast<cudaStream_t>(stream)),
                   "capture input copy");
        check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "capture input sync");
#endif
      }
    }
    (void)stream;
  });
}

eg_status toy_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                     const eg_item* const* items, int64_t n, eg_replay_buffer* bufs,
                                     int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (nb != kNumBuffers) fail(EG_ERR_INVALID_ARGUMENT, "expected 5 buffers");
    const int64_t hidden = in.cfg.hidden;
    float* x = static_cast<float*>(bufs[kX].staging.data);
    int32_t* cu = static_cast<int32_t*>(bufs[kCuSeqlens].staging.data);
    int32_t* seq_id = static_cast<int32_t*>(bufs[kSeqId].staging.data);
    const int64_t cap_rows = bufs[kX].staging.shape[0];
    const int64_t cap_seqs = bufs[kCuSeqlens].staging.shape[0] - 1;
    int32_t seqs = 0;
    int64_t row = 0;
    cu[0] = 0;
    for (int64_t k = 0; k < n; ++k) {
      const Item& it = item_of(items[k]);
      const int64_t t = path_tokens(in, it, s->path);
      if (t == 0) continue;
      if (row + t > cap_rows)
        fail(EG_ERR_INVALID_ARGUMENT,
             "batch needs more than the budget's " + std::to_string(cap_rows) + " rows");
      if (seqs + 1 > cap_seqs)
        fail(EG_ERR_INVALID_ARGUMENT, "batch has more items than max_batch_size");
      std::memcpy(x + row * hidden, it.x.data(), static_cast<size_t>(t * hidden) * 4);
      for (int64_t r = 0; r < t; ++r) seq_id[row + r] = seqs;
      row += t;
      ++seqs;
      cu[seqs] = static_cast<int32_t>(row);
    }
    *static_cast<int32_t*>(bufs[kNumSeqs].staging.data) = seqs;
    bufs[kX].rows = row;
    bufs[kCuSeqlens].rows = seqs + 1;
    bufs[kNumSeqs].rows = 0;
    bufs[kSeqId].rows = row;
    bufs[kBias].rows = -1;  // keeps the value set at capture
  });
}

eg_status toy_pad_buffer(eg_instance* i, int32_t index, const eg_tensor* dst, int64_t rows,
                         void* stream, eg_error* err) {
  return guarded(err, [&] {
    if (index != kSeqId) fail(EG_ERR_INVALID_ARGUMENT, "only seq_id pads by callback");
    const int64_t cap = dst->shape[0];
    int32_t* p = static_cast<int32_t*>(dst->data);
    if (self(i).device == EG_DEVICE_CPU) {
      for (int64_t r = rows; r < cap; ++r) p[r] = -1;
    } else {
#ifdef TOY_HAVE_CUDA
      check_cuda(cudaMemsetAsync(p + rows, 0xFF, static_cast<size_t>(cap - rows) * 4,
                                 static_cast<cudaStream_t>(stream)),
                 "seq_id padding");
#endif
    }
    (void)stream;
  });
}

eg_status toy_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  return guarded(err, [&] {
    Instance& in = self(i);
    ++in.forwards;
    if (in.cfg.fail_forward_at > 0 && a->shape.token_budget == in.cfg.fail_forward_at)
      fail(EG_ERR_INTERNAL,
           "forward asked to fail at budget " + std::to_string(a->shape.token_budget));
    if (a->num_buffers != kNumBuffers) fail(EG_ERR_INVALID_ARGUMENT, "expected 5 buffers");
    if (in.device == EG_DEVICE_CPU) {
      forward_cpu(in, a);
      return;
    }
#ifdef TOY_HAVE_CUDA
    if (in.cfg.illegal_sync) (void)toy::illegal_sync(a->stream);  // error ignored on purpose
    const int rc = toy::launch_forward(
        static_cast<const float*>(a->buffers[kX].data),
        static_cast<const int32_t*>(a->buffers[kCuSeqlens].data),
        static_cast<const int32_t*>(a->buffers[kNumSeqs].data),
        static_cast<const float*>(a->buffers[kBias].data), a->shape.token_budget, in.cfg.hidden,
        a->buffers[kCuSeqlens].shape[0] - 1, axis_scale(&a->shape),
        static_cast<float*>(a->output.data), static_cast<int>(in.cfg.extra_kernels),
        static_cast<float*>(a->workspace), a->stream);
    if (rc != 0) fail(EG_ERR_DEVICE, std::string("toy forward kernel: ") + toy::error_string(rc));
#endif
  });
}

#ifdef TOY_DUAL_PATH
// Item k's result: the global row k, then its local rows (if it used the local path).
eg_status toy_postprocess(eg_instance* i, const eg_tensor* outputs, int32_t num_paths,
                          const eg_item* const* items, int64_t n, const eg_tensor* results,
                          void* stream, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (num_paths != 2) fail(EG_ERR_INVALID_ARGUMENT, "expected two path outputs");
    const size_t row_bytes = static_cast<size_t>(in.cfg.hidden) * 4;
    int64_t local_row = 0;
    for (int64_t k = 0; k < n; ++k) {
      const Item& it = item_of(items[k]);
      char* dst = static_cast<char*>(results[k].data);
      copy_rows(in, dst, static_cast<const char*>(outputs[0].data) + k * row_bytes, row_bytes,
                stream);
      const int64_t t = path_tokens(in, it, 1);
      if (t > 0) {
        if (!outputs[1].data) fail(EG_ERR_INTERNAL, "local path output missing");
        copy_rows(in, dst + row_bytes,
                  static_cast<const char*>(outputs[1].data) + local_row * row_bytes,
                  static_cast<size_t>(t) * row_bytes, stream);
        local_row += t;
      }
    }
  });
}
#endif

const eg_plugin_api kApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ EG_ABI_VERSION_MINOR,
    /* .struct_size = */ sizeof(eg_plugin_api),
    /* .reserved = */ 0,
    /* .name = */ TOY_NAME,
    /* .version = */ "1.0.0",
    /* .description = */ "position-dependent toy encoder for tests and overhead benchmarks",
    /* .modalities = */ EG_MODALITY_IMAGE | EG_MODALITY_VIDEO,
#ifdef TOY_HAVE_CUDA
    /* .devices = */ EG_DEVICE_CPU | EG_DEVICE_CUDA,
#else
    /* .devices = */ EG_DEVICE_CPU,
#endif
    /* .create = */ toy_create,
    /* .destroy = */ toy_destroy,
    /* .model_info = */ toy_model_info,
    /* .budget_range = */ toy_budget_range,
    /* .item_create = */ toy_item_create,
    /* .item_destroy = */ toy_item_destroy,
    /* .item_spec = */ toy_item_spec,
    /* .select_axis_keys = */ toy_select_axis_keys,
    /* .buffer_shape = */ toy_buffer_shape,
    /* .output_shape = */ toy_output_shape,
    /* .workspace_size = */ toy_workspace_size,
    /* .prepare_capture_inputs = */ toy_prepare_capture_inputs,
    /* .prepare_replay_buffers = */ toy_prepare_replay_buffers,
    /* .pad_buffer = */ toy_pad_buffer,
    /* .forward = */ toy_forward,
    /* .forward_eager = */ nullptr,
#ifdef TOY_DUAL_PATH
    /* .postprocess = */ toy_postprocess,
#else
    /* .postprocess = */ nullptr,
#endif
    /* .prepare_device = */ nullptr,
};

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  g_host = host;
  if (host && host->abi_major != EG_ABI_VERSION_MAJOR) return nullptr;
  return &kApi;
}
