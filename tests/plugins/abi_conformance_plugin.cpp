// The ABI conformance plugin: the toy encoder (plugins/toy) written against the
// raw C ABI alone (<encgraph/plugin_api.h>: its own table, guard, config
// parser and struct_size-safe copies, no SDK), so the suites prove that the C
// ABI works without our C++ SDK, and that the runtime's error paths hold. One
// source, built by tests/plugins/CMakeLists.txt under three names; the name
// (CONFORMANCE_NAME) selects the behaviour, because the tests and `encgraph
// verify` cases pick a plugin by name and assert messages that name it:
//   toy_faults  the toy plus fault switches (config keys fail_forward_at,
//               illegal_sync, huge_workspace_from, workspace_per_token,
//               spec_for_desc_skew, fail_spec_for_desc, declare_second_path)
//               for error-path tests, and one_call_at_a_time (abort when two
//               threads call into one instance at once; spec_delay_us widens
//               item_spec_for_desc to catch it)
//   toy_badpad  cu_seqlens declared EG_PAD_ZERO where the forward needs
//               EG_PAD_REPEAT_LAST (verify's target): each row finds its
//               sequence by a search that assumes the offsets never decrease,
//               so in a padded replay every item but the first comes out
//               silently wrong, while an item run alone is right
//   toy_v1_1    an ABI 1.1 table (216 bytes, minor 1, no item_spec_for_desc),
//               so the runtime's fallback for plugins built before 1.2 (a
//               synthetic item made and its spec read) stays tested
// Every name takes the fault keys (all off by default). Never installed.
//
// Per item: tokens = max(1, (height / patch) * (width / patch)) * frames rows of
// `hidden` values drawn from the item's seed (or taken from its pixels).
// Forward, per sequence s occupying rows [c_s, c_{s+1}):
//   rows[r][d] = bias + scale * sum_{c_s <= q <= r} x[q][d] + 0.001 * (r - c_s) + 0.01 * d
// and padded rows are written as 0. `scale` is the batch's capture-axis key (1
// without axes). Output "pooled" holds one row per item: the mean of its "rows".
#include <encgraph/plugin_api.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#ifdef TOY_HAVE_CUDA
#include <cuda_runtime.h>

#include "toy_kernels.hpp"
#endif

#ifndef CONFORMANCE_NAME
#error "build with CONFORMANCE_NAME defined to toy_faults, toy_badpad or toy_v1_1"
#endif
#define TOY_NAME CONFORMANCE_NAME

namespace {

const eg_host_api* g_host = nullptr;

enum Buffer {
  kX = 0,
  kCuSeqlens = 1,
  kNumSeqs = 2,
  kSeqId = 3,
  kBias = 4,
  kFrames = 5,  // first row of each video frame of the batch, then the rows (a sentinel)
  kNumBuffers = 6
};
enum Output { kRows = 0, kPooled = 1, kNumOutputs = 2 };

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

bool parse_bool(const char* key, const char* value) {
  const std::string v = value;
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  fail(EG_ERR_INVALID_ARGUMENT,
       std::string("config key '") + key + "': '" + value + "' is not a boolean (true/false)");
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

constexpr bool named(std::string_view name) {
  return std::string_view(TOY_NAME) == name;
}
// toy_badpad: zero padding where the forward needs repeat-last, and a forward
// whose rows look their sequence up in cu_seqlens (right only while the offsets
// never decrease) instead of walking the sequences.
constexpr int32_t kCuSeqlensPadding = named("toy_badpad") ? EG_PAD_ZERO : EG_PAD_REPEAT_LAST;
constexpr bool kRowsSearchSequence = named("toy_badpad");
// toy_v1_1: the table of a plugin built before 1.2.
constexpr bool kV1_1Table = named("toy_v1_1");
static_assert(named("toy_faults") || named("toy_badpad") || named("toy_v1_1"),
              "CONFORMANCE_NAME is one of toy_faults, toy_badpad, toy_v1_1");

struct Config {
  int64_t hidden = 8;
  int64_t patch = 14;
  int64_t min_budget = 64;
  int64_t max_budget = 4096;
  int64_t max_frames_per_video = 8;
  int64_t extra_kernels = 0;         // tiny launches per forward (launch-overhead benchmark)
  int64_t cpu_us_per_1k_tokens = 0;  // CPU: a forward also sleeps this per 1024 budget tokens
  // CPU: an eager forward (forward_eager) sleeps this much more per 1024
  // tokens: eager costing more than replays of other budgets suggest.
  int64_t cpu_eager_us_per_1k_tokens = 0;
  bool check_padding = true;  // CPU: verify padded rows before computing
  bool pooled = true;         // declare output "pooled" (off: one output, as a 1.0 model)
  float bias = 0.5f;
  std::vector<int64_t> axis_keys;  // one capture axis "frames" when non-empty
  // Faults (off by default).
  int64_t huge_workspace_from = 0;  // budgets >= this ask for an impossible workspace
  int64_t workspace_per_token = 0;  // extra scratch bytes per budget token (memory tests)
  int64_t fail_forward_at = 0;      // forward fails at this budget
  bool illegal_sync = false;        // forward synchronises the device (illegal in capture)
  int64_t spec_for_desc_skew = 0;   // added to item_spec_for_desc's input_size (a lie)
  bool fail_spec_for_desc = false;  // item_spec_for_desc fails where item_create does not
  // model_info declares a second path: with capture axes, the combination the
  // runtime must refuse (the SDK cannot even declare it).
  bool declare_second_path = false;
  // The threads rule checked (docs/plugin-abi.md §5): a call that finds
  // another running on the same instance aborts the process, naming both.
  bool one_call_at_a_time = false;
  int64_t spec_delay_us = 0;  // item_spec_for_desc sleeps this long (a wider window)
};

struct Instance {
  Config cfg;
  int32_t device = EG_DEVICE_CPU;
  int32_t device_index = 0;
  eg_model_info info{};
  int64_t forwards = 0;
  std::atomic<const char*> running{nullptr};  // the call in progress (one_call_at_a_time)
};

// Marks a call running on the instance for its scope; with
// one_call_at_a_time, finding another already running aborts.
class OneCall {
 public:
  OneCall(Instance& in, const char* what) : in_(in) {
    const char* other = in_.running.exchange(what);
    if (other != nullptr && in_.cfg.one_call_at_a_time) {
      std::fprintf(stderr,
                   TOY_NAME
                   ": %s called while %s runs on the same instance (two threads at "
                   "once; docs/plugin-abi.md, Threads)\n",
                   what, other);
      std::abort();
    }
  }
  ~OneCall() { in_.running.store(nullptr); }
  OneCall(const OneCall&) = delete;
  OneCall& operator=(const OneCall&) = delete;

 private:
  Instance& in_;
};

struct Item {
  int64_t tokens = 0;
  int64_t frames = 1;
  bool video = false;
  std::vector<float> x;  // tokens x hidden
};

// Values (tokens x hidden) one item may hold: 1 GiB of f32.
constexpr int64_t kMaxItemValues = int64_t{1} << 28;
constexpr int64_t kMaxBudget = int64_t{1} << 30;

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
    else if (key == "max_frames_per_video")
      c.max_frames_per_video = parse_int(k, v);
    else if (key == "extra_kernels")
      c.extra_kernels = parse_int(k, v);
    else if (key == "cpu_us_per_1k_tokens")
      c.cpu_us_per_1k_tokens = parse_int(k, v);
    else if (key == "cpu_eager_us_per_1k_tokens")
      c.cpu_eager_us_per_1k_tokens = parse_int(k, v);
    else if (key == "check_padding")
      c.check_padding = parse_bool(k, v);
    else if (key == "pooled")
      c.pooled = parse_bool(k, v);
    else if (key == "bias")
      c.bias = parse_float(k, v);
    else if (key == "capture_axis_keys")
      c.axis_keys = parse_int_list(k, v);
    else if (key == "huge_workspace_from")
      c.huge_workspace_from = parse_int(k, v);
    else if (key == "workspace_per_token")
      c.workspace_per_token = parse_int(k, v);
    else if (key == "fail_forward_at")
      c.fail_forward_at = parse_int(k, v);
    else if (key == "illegal_sync")
      c.illegal_sync = parse_bool(k, v);
    else if (key == "spec_for_desc_skew")
      c.spec_for_desc_skew = parse_int(k, v);
    else if (key == "fail_spec_for_desc")
      c.fail_spec_for_desc = parse_bool(k, v);
    else if (key == "declare_second_path")
      c.declare_second_path = parse_bool(k, v);
    else if (key == "one_call_at_a_time")
      c.one_call_at_a_time = parse_bool(k, v);
    else if (key == "spec_delay_us")
      c.spec_delay_us = parse_int(k, v);
    else
      fail(EG_ERR_INVALID_ARGUMENT,
           "unknown config key '" + key +
               "' for plugin " TOY_NAME
               " (known: hidden, patch, min_budget, max_budget, max_frames_per_video, "
               "extra_kernels, cpu_us_per_1k_tokens, cpu_eager_us_per_1k_tokens, check_padding, "
               "pooled, bias, capture_axis_keys, huge_workspace_from, workspace_per_token, "
               "fail_forward_at, illegal_sync, spec_for_desc_skew, fail_spec_for_desc, "
               "declare_second_path, one_call_at_a_time, spec_delay_us)");
  }
  require_in_range("hidden", c.hidden, 1, 65536);
  require_in_range("patch", c.patch, 1, int64_t{1} << 20);
  // Their order and positivity are the runtime's to check (the budget range).
  require_in_range("min_budget", c.min_budget, -kMaxBudget, kMaxBudget);
  require_in_range("max_budget", c.max_budget, -kMaxBudget, kMaxBudget);
  require_in_range("max_frames_per_video", c.max_frames_per_video, 0, 65536);
  require_in_range("extra_kernels", c.extra_kernels, 0, int64_t{1} << 20);
  require_in_range("cpu_us_per_1k_tokens", c.cpu_us_per_1k_tokens, 0, 1000000);
  require_in_range("cpu_eager_us_per_1k_tokens", c.cpu_eager_us_per_1k_tokens, 0, 1000000);
  for (int64_t key : c.axis_keys) require_in_range("capture_axis_keys", key, 1, 65536);
  require_in_range("huge_workspace_from", c.huge_workspace_from, 0, INT64_MAX);
  require_in_range("workspace_per_token", c.workspace_per_token, 0, int64_t{1} << 30);
  require_in_range("fail_forward_at", c.fail_forward_at, 0, INT64_MAX);
  require_in_range("spec_for_desc_skew", c.spec_for_desc_skew, 0, int64_t{1} << 30);
  require_in_range("spec_delay_us", c.spec_delay_us, 0, 1000000);
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

// Video frames item `it` sends through the one path: every frame of a video;
// images count none (max_frames_per_batch bounds video frames).
int64_t video_frames(const Item& it) {
  return it.video ? it.frames : 0;
}

// Each graph's max sequences: the batch's item count.
int64_t max_seqs(const eg_graph_shape* s) {
  return std::max<int64_t>(s->max_batch_size, 1);
}

// Frames one batch may hold: max_frames_per_batch, and no more than
// the budget's rows (every frame has at least one row), which keeps the buffer
// small when the bound is generous.
int64_t frame_capacity(const eg_graph_shape* s) {
  return std::clamp<int64_t>(s->max_frames_per_batch, 0, std::max<int64_t>(s->token_budget, 0));
}

float axis_scale(const eg_graph_shape* s) {
  return s->num_axis_keys > 0 ? static_cast<float>(s->axis_keys[0]) : 1.0f;
}

// Output "pooled" of a forward, or null when the runtime passes none (1.0).
float* pooled_output(const eg_forward_args* a) {
  if (!EG_HAS_FIELD(a->struct_size, eg_forward_args, num_outputs) || !a->outputs ||
      a->num_outputs <= kPooled)
    return nullptr;
  return static_cast<float*>(a->outputs[kPooled].data);
}

// The CPU padding check: fails loudly when a padding logic was not applied.
void check_padding_cpu(const Instance& in, const eg_forward_args* a, int64_t real_rows) {
  const int64_t budget = a->shape.token_budget, hidden = in.cfg.hidden;
  const float* x = static_cast<const float*>(a->buffers[kX].data);
  const int32_t* cu = static_cast<const int32_t*>(a->buffers[kCuSeqlens].data);
  const int32_t n = *static_cast<const int32_t*>(a->buffers[kNumSeqs].data);
  const int32_t* seq_id = static_cast<const int32_t*>(a->buffers[kSeqId].data);
  const int32_t* frames = static_cast<const int32_t*>(a->buffers[kFrames].data);
  const int64_t cap = a->buffers[kCuSeqlens].shape[0];
  const int64_t frame_cap = a->buffers[kFrames].shape[0];
  if (kCuSeqlensPadding == EG_PAD_REPEAT_LAST)
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
      if (seq_id[r] != s) fail(EG_ERR_INTERNAL, "padding check: seq_id disagrees with cu_seqlens");
  for (int64_t f = 1; f < frame_cap; ++f)
    if (frames[f] < frames[f - 1])
      fail(EG_ERR_INTERNAL, "padding check: frame_first_row decreases at " + std::to_string(f) +
                                " (repeat-last padding missing)");
  if (frames[frame_cap - 1] != real_rows)
    fail(EG_ERR_INTERNAL, "padding check: the last frame_first_row entry is " +
                              std::to_string(frames[frame_cap - 1]) + ", not the batch's " +
                              std::to_string(real_rows) + " rows (repeat-last padding missing)");
}

// The start row of the sequence holding row r, found by a search that is right
// only while cu_seqlens never decreases: the last slot starting at or before r.
int64_t search_sequence_start(const int32_t* cu, int64_t cap, int64_t r) {
  for (int64_t k = cap - 1; k > 0; --k)
    if (cu[k] <= r) return cu[k];
  return cu[0];
}

void forward_cpu(const Instance& in, const eg_forward_args* a) {
  const int64_t budget = a->shape.token_budget, hidden = in.cfg.hidden;
  const float* x = static_cast<const float*>(a->buffers[kX].data);
  const int32_t* cu = static_cast<const int32_t*>(a->buffers[kCuSeqlens].data);
  const int32_t n = *static_cast<const int32_t*>(a->buffers[kNumSeqs].data);
  const float bias = *static_cast<const float*>(a->buffers[kBias].data);
  float* out = static_cast<float*>(a->output.data);
  const int64_t cap = a->buffers[kCuSeqlens].shape[0];
  if (n < 0 || n + 1 > cap) fail(EG_ERR_INVALID_ARGUMENT, "num_seqs out of range");
  const int64_t real_rows = cu[n];
  if (real_rows < 0 || real_rows > budget)
    fail(EG_ERR_INVALID_ARGUMENT, "cu_seqlens[num_seqs] out of range");
  if (in.cfg.check_padding) check_padding_cpu(in, a, real_rows);
  const float scale = axis_scale(&a->shape);
  const auto value = [&](float acc, int64_t r, int64_t start, int64_t d) {
    return bias + scale * acc + 0.001f * static_cast<float>(r - start) +
           0.01f * static_cast<float>(d);
  };
  std::vector<float> acc(hidden);
  if (kRowsSearchSequence) {
    int64_t start = -1;
    for (int64_t r = 0; r < real_rows; ++r) {
      const int64_t st = search_sequence_start(cu, cap, r);
      if (st < 0 || st > r) fail(EG_ERR_INVALID_ARGUMENT, "cu_seqlens out of range");
      if (st != start) {  // a new sequence: its prefix sum restarts at its first row
        start = st;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t q = start; q < r; ++q)
          for (int64_t d = 0; d < hidden; ++d) acc[d] += x[q * hidden + d];
      }
      for (int64_t d = 0; d < hidden; ++d) {
        acc[d] += x[r * hidden + d];
        out[r * hidden + d] = value(acc[d], r, start, d);
      }
    }
  } else {
    for (int32_t s = 0; s < n; ++s) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t r = cu[s]; r < cu[s + 1]; ++r)
        for (int64_t d = 0; d < hidden; ++d) {
          acc[d] += x[r * hidden + d];
          out[r * hidden + d] = value(acc[d], r, cu[s], d);
        }
    }
  }
  for (int64_t r = real_rows; r < budget; ++r)
    for (int64_t d = 0; d < hidden; ++d) out[r * hidden + d] = 0.0f;
  if (float* pooled = pooled_output(a)) {
    const int64_t slots = a->outputs[kPooled].shape[0];
    for (int64_t s = 0; s < slots; ++s)
      for (int64_t d = 0; d < hidden; ++d) {
        float sum = 0.0f;
        const int64_t start = s < n ? cu[s] : 0, end = s < n ? cu[s + 1] : 0;
        for (int64_t r = start; r < end; ++r) sum += out[r * hidden + d];
        pooled[s * hidden + d] = end > start ? sum / static_cast<float>(end - start) : 0.0f;
      }
  }
  volatile float* ws = static_cast<float*>(a->workspace);
  for (int64_t k = 0; k < in.cfg.extra_kernels && ws; ++k) ws[k] = ws[k] + 1.0f;
  // A forward whose cost grows with the budget, for the cost model's tests:
  // deterministic enough to compare warm-ups with replays on any machine.
  if (in.cfg.cpu_us_per_1k_tokens > 0)
    std::this_thread::sleep_for(
        std::chrono::microseconds(in.cfg.cpu_us_per_1k_tokens * budget / 1024));
}

#ifdef TOY_HAVE_CUDA
void check_cuda(cudaError_t st, const char* what) {
  if (st != cudaSuccess) fail(EG_ERR_DEVICE, std::string(what) + ": " + cudaGetErrorString(st));
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
    mi.num_paths = in->cfg.declare_second_path ? 2 : 1;
    mi.paths[0] = {"default", 0, 0, 0};
    mi.path_units[0] = "rows";
    if (in->cfg.declare_second_path) {
      mi.paths[1] = {"second", 0, 0, 0};
      mi.path_units[1] = "rows";
    }
    if (!in->cfg.axis_keys.empty()) {
      mi.num_capture_axes = 1;
      mi.capture_axes[0].name = "frames";
      mi.capture_axes[0].num_keys = static_cast<int32_t>(in->cfg.axis_keys.size());
      mi.capture_axes[0].keys = in->cfg.axis_keys.data();
    }
    mi.num_buffers = kNumBuffers;
    mi.buffers[kX] = {"x", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[kCuSeqlens] = {"cu_seqlens", EG_DTYPE_I32, kCuSeqlensPadding};
    mi.buffers[kNumSeqs] = {"num_seqs", EG_DTYPE_I32, EG_PAD_ZERO};
    mi.buffers[kSeqId] = {"seq_id", EG_DTYPE_I32, EG_PAD_CALLBACK};
    mi.buffers[kBias] = {"bias", EG_DTYPE_F32, EG_PAD_ZERO};
    mi.buffers[kFrames] = {"frame_first_row", EG_DTYPE_I32, EG_PAD_REPEAT_LAST};
    mi.num_outputs = in->cfg.pooled ? kNumOutputs : 1;
    mi.outputs[kRows] = {"rows", in->cfg.hidden, EG_DTYPE_F32, 0, 0};
    mi.outputs[kPooled] = {"pooled", in->cfg.hidden, EG_DTYPE_F32, 0, 1};
    *out = reinterpret_cast<eg_instance*>(in.release());
  });
}

void toy_destroy(eg_instance* instance) {
  delete reinterpret_cast<Instance*>(instance);
}

// Writes only the fields the runtime's struct_size covers: a 1.0 runtime's
// eg_model_info ends before num_outputs.
eg_status toy_model_info(eg_instance* i, eg_model_info* out, eg_error* err) {
  return guarded(err, [&] {
    const eg_model_info& mi = self(i).info;
    const size_t size = out->struct_size;
    if (!EG_HAS_FIELD(size, eg_model_info, buffers))
      fail(EG_ERR_INVALID_ARGUMENT, "eg_model_info.struct_size " + std::to_string(size) +
                                        " is smaller than ABI 1.0's " +
                                        std::to_string(EG_MODEL_INFO_V1_0_SIZE));
    out->out_hidden_size = mi.out_hidden_size;
    out->out_dtype = mi.out_dtype;
    out->max_frames_per_video = mi.max_frames_per_video;
    out->num_paths = mi.num_paths;
    out->num_capture_axes = mi.num_capture_axes;
    out->num_buffers = mi.num_buffers;
    std::copy(std::begin(mi.paths), std::end(mi.paths), out->paths);
    std::copy(std::begin(mi.capture_axes), std::end(mi.capture_axes), out->capture_axes);
    std::copy(std::begin(mi.buffers), std::end(mi.buffers), out->buffers);
    if (EG_HAS_FIELD(size, eg_model_info, num_outputs)) out->num_outputs = mi.num_outputs;
    if (EG_HAS_FIELD(size, eg_model_info, outputs))
      std::copy(std::begin(mi.outputs), std::end(mi.outputs), out->outputs);
    if (EG_HAS_FIELD(size, eg_model_info, path_units))
      std::copy(std::begin(mi.path_units), std::end(mi.path_units), out->path_units);
  });
}

eg_status toy_budget_range(eg_instance* i, int64_t* lo, int64_t* hi, eg_error* err) {
  return guarded(err, [&] {
    *lo = self(i).cfg.min_budget;
    *hi = self(i).cfg.max_budget;
  });
}

// The item a description makes, its values not drawn yet, after every check
// on its geometry: item_create and item_spec_for_desc both start here, so the
// spec promised before decoding is the spec of the item made.
std::unique_ptr<Item> checked_item(const Instance& in, const eg_item_desc* d) {
  // Every field read here is ABI 1.0's; a runtime's eg_item_desc has at least those.
  if (eg_host_struct_size(g_host, 0) < EG_FIELD_END(eg_item_desc, seed))
    fail(EG_ERR_INVALID_ARGUMENT, "the runtime's eg_item_desc is smaller than ABI 1.0's");
  if (d->height <= 0 || d->width <= 0 || d->frames <= 0)
    fail(EG_ERR_INVALID_ARGUMENT, "item geometry must be positive, got " +
                                      std::to_string(d->height) + "x" + std::to_string(d->width) +
                                      "x" + std::to_string(d->frames));
  if (d->modality == EG_MODALITY_IMAGE && d->frames != 1)
    fail(EG_ERR_INVALID_ARGUMENT, "an image item has exactly one frame");
  auto it = std::make_unique<Item>();
  it->frames = d->frames;
  it->video = d->modality == EG_MODALITY_VIDEO;
  const int64_t per_frame = std::max<int64_t>(
      1, checked_mul(d->height / in.cfg.patch, d->width / in.cfg.patch, "the item's tokens"));
  it->tokens = checked_mul(per_frame, d->frames, "the item's tokens");
  const int64_t values = checked_mul(it->tokens, in.cfg.hidden, "the item's values");
  if (values > kMaxItemValues)
    fail(EG_ERR_INVALID_ARGUMENT,
         TOY_NAME ": item of " + std::to_string(d->height) + "x" + std::to_string(d->width) +
             " x " + std::to_string(d->frames) + " frames has " + std::to_string(it->tokens) +
             " tokens of " + std::to_string(in.cfg.hidden) + " values, over the limit of " +
             std::to_string(kMaxItemValues) + " values per item (raise patch)");
  return it;
}

eg_status toy_item_create(eg_instance* i, const eg_item_desc* d, eg_item** out, eg_error* err) {
  const OneCall call(self(i), "item_create");
  return guarded(err, [&] {
    const Instance& in = self(i);
    auto it = checked_item(in, d);
    const int64_t h = in.cfg.hidden;
    it->x.resize(static_cast<size_t>(it->tokens * h));
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

void toy_item_destroy(eg_instance* i, eg_item* item) {
  const OneCall call(self(i), "item_destroy");
  delete reinterpret_cast<Item*>(item);
}

const Item& item_of(const eg_item* i) {
  return *reinterpret_cast<const Item*>(i);
}

// Writes within the runtime's eg_item_spec size only (eg_host_struct_size).
void write_spec(const Item& it, eg_item_spec* out) {
  const size_t size = eg_host_struct_size(g_host, 1);
  if (!EG_HAS_FIELD(size, eg_item_spec, path_tokens))
    fail(EG_ERR_INVALID_ARGUMENT, "the runtime's eg_item_spec is smaller than ABI 1.0's");
  out->input_size = it.tokens;
  out->frames = it.frames;
  out->output_tokens = it.tokens;
  for (int32_t p = 0; p < EG_MAX_PATHS; ++p) out->path_tokens[p] = p == 0 ? it.tokens : 0;
}

eg_status toy_item_spec(eg_instance* i, const eg_item* item, eg_item_spec* out, eg_error* err) {
  const OneCall call(self(i), "item_spec");
  return guarded(err, [&] { write_spec(item_of(item), out); });
}

// 1.2: the spec before any pixels exist (data-parallel balancing).
[[maybe_unused]] eg_status toy_item_spec_for_desc(eg_instance* i, const eg_item_desc* d,
                                                  eg_item_spec* out, eg_error* err) {
  const OneCall call(self(i), "item_spec_for_desc");
  return guarded(err, [&] {
    write_spec(*checked_item(self(i), d), out);
    const Config& c = self(i).cfg;
    if (c.spec_delay_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(c.spec_delay_us));
    if (c.fail_spec_for_desc)
      fail(EG_ERR_INVALID_ARGUMENT, "item_spec_for_desc asked to fail (fail_spec_for_desc)");
    out->input_size += c.spec_for_desc_skew;
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
      case kFrames:
        out->ndim = 1;
        out->shape[0] = frame_capacity(s) + 1;
        break;
      default: fail(EG_ERR_INVALID_ARGUMENT, "no buffer " + std::to_string(index));
    }
  });
}

eg_status toy_output_shape_at(eg_instance* i, const eg_graph_shape* s, int32_t index,
                              eg_tensor* out, eg_error* err) {
  return guarded(err, [&] {
    if (index != kRows && index != kPooled)
      fail(EG_ERR_INVALID_ARGUMENT, "no output " + std::to_string(index));
    *out = eg_tensor{};
    out->ndim = 2;
    out->shape[0] = index == kRows ? s->token_budget : max_seqs(s);
    out->shape[1] = self(i).cfg.hidden;
  });
}

eg_status toy_output_shape(eg_instance* i, const eg_graph_shape* s, eg_tensor* out, eg_error* err) {
  return toy_output_shape_at(i, s, kRows, out, err);
}

// toy_faults' workspace: an impossible size from a budget on, or a size per token.
size_t fault_workspace_bytes(const Config& c, const eg_graph_shape* s) {
  if (c.huge_workspace_from > 0 && s->token_budget >= c.huge_workspace_from)
    return size_t{1} << 50;  // no machine has this: exercises out-of-memory handling
  return static_cast<size_t>(
      checked_mul(c.workspace_per_token, s->token_budget, "the workspace size"));
}

eg_status toy_workspace_size(eg_instance* i, const eg_graph_shape* s, size_t* bytes,
                             eg_error* err) {
  return guarded(err, [&] {
    const Config& c = self(i).cfg;
    *bytes = static_cast<size_t>(c.extra_kernels + 1) * sizeof(float) + fault_workspace_bytes(c, s);
  });
}

// One sequence of a batch as the staging writer sees it.
struct Sequence {
  const float* x;  // rows x hidden
  int64_t rows;
  int64_t frames;  // video frames on this path (0 for an image)
};

// Writes a batch into host staging, one path: the real rows, offsets, ids and
// frame starts, with `rows` set for the runtime's padding. Shared by capture
// (dummy sequences, and the bias) and replay (the batch's items; the bias keeps
// its captured value).
void write_staging(const Instance& in, const eg_graph_shape* s, const std::vector<Sequence>& seqs,
                   bool write_bias, eg_replay_buffer* bufs, int32_t nb) {
  if (nb != kNumBuffers)
    fail(EG_ERR_INVALID_ARGUMENT,
         "expected " + std::to_string(kNumBuffers) + " buffers, got " + std::to_string(nb));
  const int64_t hidden = in.cfg.hidden;
  float* x = static_cast<float*>(bufs[kX].staging.data);
  int32_t* cu = static_cast<int32_t*>(bufs[kCuSeqlens].staging.data);
  int32_t* seq_id = static_cast<int32_t*>(bufs[kSeqId].staging.data);
  int32_t* frame_first_row = static_cast<int32_t*>(bufs[kFrames].staging.data);
  const int64_t cap_rows = bufs[kX].staging.shape[0];
  const int64_t cap_seqs = bufs[kCuSeqlens].staging.shape[0] - 1;
  const int64_t cap_frames = bufs[kFrames].staging.shape[0] - 1;
  int64_t frames = 0;
  for (const Sequence& q : seqs) frames += q.frames;
  if (frames > s->max_frames_per_batch || frames > cap_frames)
    fail(EG_ERR_INVALID_ARGUMENT,
         "batch has " + std::to_string(frames) + " video frames, more than max_frames_per_batch " +
             std::to_string(s->max_frames_per_batch) + " (raise budgets.max_frames_per_batch)");
  int32_t n = 0;
  int64_t row = 0, frame = 0;
  cu[0] = 0;
  for (const Sequence& q : seqs) {
    if (row + q.rows > cap_rows)
      fail(EG_ERR_INVALID_ARGUMENT,
           "batch needs more than the budget's " + std::to_string(cap_rows) + " rows");
    if (n + 1 > cap_seqs) fail(EG_ERR_INVALID_ARGUMENT, "batch has more items than max_batch_size");
    std::memcpy(x + row * hidden, q.x, static_cast<size_t>(q.rows * hidden) * sizeof(float));
    for (int64_t r = 0; r < q.rows; ++r) seq_id[row + r] = n;
    for (int64_t f = 0; f < q.frames; ++f)
      frame_first_row[frame++] = static_cast<int32_t>(row + f * (q.rows / q.frames));
    row += q.rows;
    ++n;
    cu[n] = static_cast<int32_t>(row);
  }
  frame_first_row[frame] = static_cast<int32_t>(row);  // repeat-last pads with it
  *static_cast<int32_t*>(bufs[kNumSeqs].staging.data) = n;
  bufs[kX].rows = row;
  bufs[kCuSeqlens].rows = n + 1;
  bufs[kNumSeqs].rows = 0;
  bufs[kSeqId].rows = row;
  bufs[kFrames].rows = frame + 1;
  if (write_bias) {
    *static_cast<float*>(bufs[kBias].staging.data) = in.cfg.bias;
    bufs[kBias].rows = 1;
  } else {
    bufs[kBias].rows = -1;  // keeps the value set at capture
  }
}

// Capture inputs, host-staged: max_batch_size sequences splitting the budget,
// like a full batch. No device call: the runtime copies and pads.
eg_status toy_prepare_capture_staging(eg_instance* i, const eg_graph_shape* s,
                                      eg_replay_buffer* bufs, int32_t nb, eg_error* err) {
  return guarded(err, [&] {
    const Instance& in = self(i);
    const int64_t hidden = in.cfg.hidden, budget = std::max<int64_t>(s->token_budget, 0);
    const int64_t seqs = std::min<int64_t>(max_seqs(s), std::max<int64_t>(budget, 1));
    std::vector<float> x(static_cast<size_t>(checked_mul(budget, hidden, "the capture input")));
    for (size_t k = 0; k < x.size(); ++k) x[k] = draw(1234, k / hidden, k % hidden);
    std::vector<Sequence> batch;
    int64_t row = 0;
    for (int64_t k = 0; k < seqs; ++k) {
      const int64_t n = budget / seqs + (k == seqs - 1 ? budget % seqs : 0);
      batch.push_back({x.data() + row * hidden, n, 0});
      row += n;
    }
    write_staging(in, s, batch, true, bufs, nb);
  });
}

eg_status toy_prepare_replay_buffers(eg_instance* i, const eg_graph_shape* s,
                                     const eg_item* const* items, int64_t n, eg_replay_buffer* bufs,
                                     int32_t nb, eg_error* err) {
  const OneCall call(self(i), "prepare_replay_buffers");
  return guarded(err, [&] {
    const Instance& in = self(i);
    std::vector<Sequence> batch;
    for (int64_t k = 0; k < n; ++k) {
      const Item& it = item_of(items[k]);
      batch.push_back({it.x.data(), it.tokens, video_frames(it)});
    }
    write_staging(in, s, batch, false, bufs, nb);
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

// toy_faults' forward faults: a failure at one budget, a synchronisation that
// invalidates a capture.
void before_forward(const Instance& in, const eg_forward_args* a) {
  if (in.cfg.fail_forward_at > 0 && a->shape.token_budget == in.cfg.fail_forward_at)
    fail(EG_ERR_INTERNAL,
         "forward asked to fail at budget " + std::to_string(a->shape.token_budget));
#ifdef TOY_HAVE_CUDA
  // Synchronising inside a capture invalidates it; the error is ignored on purpose.
  if (in.cfg.illegal_sync && in.device == EG_DEVICE_CUDA) (void)cudaDeviceSynchronize();
#endif
}

eg_status toy_forward(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  const OneCall call(self(i), "forward");
  return guarded(err, [&] {
    Instance& in = self(i);
    ++in.forwards;
    before_forward(in, a);
    if (a->num_buffers != kNumBuffers)
      fail(EG_ERR_INVALID_ARGUMENT, "expected " + std::to_string(kNumBuffers) + " buffers");
    if (in.device == EG_DEVICE_CPU) {
      forward_cpu(in, a);
      return;
    }
#ifdef TOY_HAVE_CUDA
    const int rc = toy::launch_forward(
        static_cast<const float*>(a->buffers[kX].data),
        static_cast<const int32_t*>(a->buffers[kCuSeqlens].data),
        static_cast<const int32_t*>(a->buffers[kNumSeqs].data),
        static_cast<const float*>(a->buffers[kBias].data), a->shape.token_budget, in.cfg.hidden,
        a->buffers[kCuSeqlens].shape[0] - 1, axis_scale(&a->shape),
        static_cast<float*>(a->output.data), pooled_output(a),
        static_cast<int>(in.cfg.extra_kernels), static_cast<float*>(a->workspace), a->stream);
    if (rc != 0) fail(EG_ERR_DEVICE, std::string("toy forward kernel: ") + toy::error_string(rc));
#endif
  });
}

// Eager runs (the exact batch size, outside any graph): the same forward, and
// on the CPU the extra cost cpu_eager_us_per_1k_tokens asks for.
eg_status toy_forward_eager(eg_instance* i, const eg_forward_args* a, eg_error* err) {
  const eg_status st = toy_forward(i, a, err);
  if (st != EG_OK) return st;
  return guarded(err, [&] {
    const Instance& in = self(i);
    if (in.device == EG_DEVICE_CPU && in.cfg.cpu_eager_us_per_1k_tokens > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(in.cfg.cpu_eager_us_per_1k_tokens *
                                                            a->shape.token_budget / 1024));
  });
}

const eg_plugin_api kApi = {
    /* .abi_major = */ EG_ABI_VERSION_MAJOR,
    /* .abi_minor = */ kV1_1Table ? 1u : EG_ABI_VERSION_MINOR,
    /* .struct_size = */ kV1_1Table ? EG_PLUGIN_API_V1_1_SIZE : sizeof(eg_plugin_api),
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
    /* .prepare_capture_inputs = */ nullptr,  // 1.1: prepare_capture_staging instead
    /* .prepare_replay_buffers = */ toy_prepare_replay_buffers,
    /* .pad_buffer = */ toy_pad_buffer,
    /* .forward = */ toy_forward,
    /* .forward_eager = */ toy_forward_eager,
    /* .postprocess = */ nullptr,
    /* .prepare_device = */ nullptr,
    /* .prepare_capture_staging = */ toy_prepare_capture_staging,
    /* .output_shape_at = */ toy_output_shape_at,
    /* .postprocess_outputs = */ nullptr,  // the runtime's copy, for both outputs
    /* .item_spec_for_desc = */ kV1_1Table ? nullptr : toy_item_spec_for_desc,
    // Its fault switches are global counters: items are made one at a time.
    /* .flags = */ 0,
};

}  // namespace

extern "C" EG_PLUGIN_EXPORT const eg_plugin_api* encgraph_plugin_entry(const eg_host_api* host) {
  g_host = host;
  if (host && host->abi_major != EG_ABI_VERSION_MAJOR) return nullptr;
  return &kApi;
}
