// The toy encoder as one SDK model class (docs/sdk.md): a small, deliberately
// position-dependent "encoder" that exercises every part of the ABI the
// budget-graph manager uses, so that a wrong order, a wrong slice, a missing
// padding step or padding leaking into a real item changes the result. Not a
// model. Two plugins give it a name: toy_plugin.cpp ("toy": one path, the
// runtime's default copy for both outputs) and toy_dual_plugin.cpp
// ("toy_dual": a global and a local path, its own post-processing).
//
// Per item: tokens = max(1, (height / patch) * (width / patch)) * frames rows of
// `hidden` values drawn from the item's seed (or taken from its pixels); the
// forward is cpu_forward's (toy_model.cpp; toy_kernels.cu the same on CUDA). `scale` is the batch's
// capture-axis key (1 without axes). Output "pooled" holds one row per item: the mean of the item's
// "rows" (toy_dual: of its global row and its local rows).
//
// Config keys (Options): hidden, patch, min_budget, max_budget,
// local_min_tokens, local_min_budget (toy_dual), max_frames_per_video,
// extra_kernels, cpu_us_per_1k_tokens, cpu_eager_us_per_1k_tokens,
// check_padding, pooled, bias, capture_axis_keys. No weights.
//
// Buffers (rows first): x [budget, hidden] (zero padding), cu_seqlens
// [max_seqs + 1] (repeat-last: padded entries are empty sequences), num_seqs
// (a scalar), seq_id [budget] (padded with -1 by the plugin's callback), bias
// [1] (written at capture only), frame_first_row [frames + 1] (the first row
// of each video frame, then the batch's rows; repeat-last).
#pragma once

#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace toy {

namespace sdk = encgraph::sdk;

// The toy's options: every key of its [plugin.config] table, read and bounded
// once (both forms take every key).
struct Options {
  std::string plugin;  // "toy" or "toy_dual": prefixes messages
  int64_t hidden = 8;
  int64_t patch = 14;
  int64_t min_budget = 64;
  int64_t max_budget = 4096;
  int64_t local_min_tokens = 4;  // toy_dual: items below this skip the local path
  int64_t local_min_budget = 0;  // toy_dual: the local path's minimum budget
  int64_t max_frames_per_video = 8;
  int64_t extra_kernels = 0;         // tiny launches per forward (launch-overhead benchmark)
  int64_t cpu_us_per_1k_tokens = 0;  // CPU: a forward also sleeps this per 1024 budget tokens
  // CPU: an eager forward sleeps this much more per 1024 tokens: eager costing
  // more than replays of other budgets suggest (the cost model's tests).
  int64_t cpu_eager_us_per_1k_tokens = 0;
  bool check_padding = true;  // CPU: verify padded rows before computing
  bool pooled = true;         // declare output "pooled" (off: one output, as a 1.0 model)
  float bias = 0.5f;
  std::vector<int64_t> axis_keys;  // one capture axis "frames" when non-empty
};

// Reads every key; `weights` must be unset, "random" or "none" (no weights).
Options parse_options(sdk::Config& config, const std::optional<std::string>& weights);

enum Buffer : int32_t { kX, kCuSeqlens, kNumSeqs, kSeqId, kBias, kFrames };
enum Output : int32_t { kRows, kPooled };

// "toy": one path; "toy_dual": a global path (one summary row per item) and a
// local path (the item's rows, unless it is below local_min_tokens).
enum class Form { Single, Dual };

struct Item {
  int64_t tokens = 0;
  int64_t frames = 1;
  bool video = false;
  std::vector<float> x;  // tokens x hidden
};

// The item `desc` makes, after every check on its geometry, its values drawn
// from its seed (or taken from its pixels) when `values` is set.
Item make_item(const Options& o, const eg_item_desc& desc, bool values);
// What item_spec reports for `it` (item_spec_for_desc: the same, of the undrawn item).
sdk::ItemSpec spec_of(const Options& o, Form form, const Item& it);

// Rows item `it` sends through `path` (the unit of every path: "rows").
int64_t path_tokens(const Options& o, Form form, const Item& it, int32_t path);
// Each graph's max sequences: the batch's item count.
int64_t max_seqs(const eg_graph_shape& s);
// Frames one batch may hold on the shape's path (0 on toy_dual's global path).
int64_t frame_capacity(Form form, const eg_graph_shape& s);
// The batch's capture-axis key (1 without axes): the forward's scale.
float axis_scale(const eg_graph_shape& s);

// A batch of one path into host staging: the real rows, offsets, ids and frame
// starts, `rows` set for the runtime's padding. Replay keeps the captured bias.
void stage_batch(const Options& o, Form form, const eg_graph_shape& s,
                 const std::vector<const Item*>& items, sdk::StagingSet& buffers);
// Capture inputs: max_batch_size sequences of drawn values splitting the
// budget, like a full batch, and the bias.
void stage_capture(const Options& o, const eg_graph_shape& s, sdk::StagingSet& buffers);

// One forward's memory, as the runtime passed it.
struct ForwardCall {
  const eg_graph_shape& shape;
  const eg_tensor* buffers;  // in Buffer order
  float* out;                // output "rows": [token_budget, hidden]
  float* pooled;             // output "pooled": [pooled_slots, hidden], or null
  int64_t pooled_slots;
  float* workspace;  // extra_kernels + 1 floats, or null
};

// The devices this build can run on (the plugins' identity).
#ifdef TOY_HAVE_CUDA
inline constexpr uint32_t kDevices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
inline constexpr uint32_t kDevices = EG_DEVICE_CPU;
#endif

// Where the toy runs: cpu_forward, or toy_kernels.cu when the plugin is built
// with CUDA. One interface, so the model class holds no device branches.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool on_cpu() const = 0;
  virtual void forward(const Options& o, const ForwardCall& call, void* stream) const = 0;
  // seq_id's padding: rows [rows, capacity) of `dst` set to -1.
  virtual void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void* stream) const = 0;
  // toy_dual's post-processing: a copy between outputs, and the mean of rows.
  virtual void copy(void* dst, const void* src, size_t bytes, void* stream) const = 0;
  virtual void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden,
                         void* stream) const = 0;
};

// The backend of `device`; CUDA selects `device_index` (cudaSetDevice) and is
// EG_ERR_UNSUPPORTED in a build without the kernels (toy_cuda_backend.cpp has
// the CUDA one).
std::unique_ptr<Backend> make_backend(int32_t device, int32_t device_index);
std::unique_ptr<Backend> make_cuda_backend(int32_t device_index);

inline constexpr const char* kDescription =
    "position-dependent toy encoder for tests and overhead benchmarks";
inline constexpr uint32_t kModalities = EG_MODALITY_IMAGE | EG_MODALITY_VIDEO;

class Toy {
 public:
  using Item = toy::Item;
  // make_item reads the options only: items may be made on several threads.
  static constexpr bool concurrent_items = true;

  Toy(sdk::CreateArgs& args, Form form)
      : form_(form),
        opt_(parse_options(args.config, args.weights())),
        backend_(make_backend(args.device(), args.device_index())) {
    if (form_ == Form::Dual)
      info_.path("global", "rows").path("local", "rows", {opt_.local_min_budget, true});
    else
      info_.path("default", "rows");
    if (!opt_.axis_keys.empty()) info_.capture_axis("frames", opt_.axis_keys);
    info_.max_frames_per_video(static_cast<int32_t>(opt_.max_frames_per_video))
        .buffer("x", EG_DTYPE_F32)
        .buffer("cu_seqlens", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)
        .buffer("num_seqs", EG_DTYPE_I32)
        .buffer("seq_id", EG_DTYPE_I32, EG_PAD_CALLBACK)
        .buffer("bias", EG_DTYPE_F32)
        .buffer("frame_first_row", EG_DTYPE_I32, EG_PAD_REPEAT_LAST)
        .output("rows", opt_.hidden, EG_DTYPE_F32);
    if (opt_.pooled) info_.output("pooled", opt_.hidden, EG_DTYPE_F32, 1);
  }

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {opt_.min_budget, opt_.max_budget}; }

  Item item_create(const eg_item_desc& d) const { return make_item(opt_, d, true); }
  sdk::ItemSpec item_spec(const Item& it) const { return spec_of(opt_, form_, it); }
  // 1.2: the spec before any pixels exist, from the item's checked geometry.
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const {
    return spec_of(opt_, form_, make_item(opt_, d, false));
  }

  // The smallest key that covers the batch's longest video, else the largest key.
  std::vector<int64_t> select_axis_keys(const sdk::Batch<Item>& items) const {
    int64_t frames = 1;
    for (const Item& it : items) frames = std::max(frames, it.frames);
    const auto key = std::find_if(opt_.axis_keys.begin(), opt_.axis_keys.end(),
                                  [&](int64_t k) { return k >= frames; });
    return {key != opt_.axis_keys.end() ? *key : opt_.axis_keys.back()};
  }

  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const {
    switch (buffer) {
      case kX: return {s.token_budget, opt_.hidden};
      case kCuSeqlens: return {max_seqs(s) + 1};
      case kNumSeqs: return {};
      case kSeqId: return {s.token_budget};
      case kBias: return {1};
      default: return {frame_capacity(form_, s) + 1};  // kFrames
    }
  }
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t output) const {
    return {output == kRows ? s.token_budget : max_seqs(s), opt_.hidden};
  }
  size_t workspace_size(const eg_graph_shape&) const {
    return static_cast<size_t>(opt_.extra_kernels + 1) * sizeof(float);
  }

  // Host-staged, no device call: the runtime copies and pads.
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers) {
    stage_capture(opt_, s, buffers);
  }
  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers) {
    std::vector<const Item*> batch;
    for (const Item& it : items) batch.push_back(&it);
    stage_batch(opt_, form_, s, batch, buffers);
  }
  void pad_buffer(int32_t buffer, const eg_tensor& dst, int64_t rows, void* stream) {
    if (buffer != kSeqId) sdk::invalid("only seq_id pads by callback");
    backend_->pad_seq_id(static_cast<int32_t*>(dst.data), rows, dst.shape[0], stream);
  }

  void forward(const sdk::ForwardArgs& args) {
    const bool pooled = opt_.pooled && args.num_outputs() > kPooled;
    const sdk::TensorView<float> rows = args.output<float>(kRows);
    const ForwardCall call{args.shape(),
                           args.buffers(),
                           rows.data(),
                           pooled ? static_cast<float*>(args.output_data(kPooled)) : nullptr,
                           pooled ? args.output<float>(kPooled).rows() : 0,
                           static_cast<float*>(args.workspace())};
    backend_->forward(opt_, call, args.stream());
  }
  // Eager runs (the exact batch size, outside any graph): the same forward, and
  // on the CPU the extra cost cpu_eager_us_per_1k_tokens asks for.
  void forward_eager(const sdk::ForwardArgs& args) {
    forward(args);
    if (backend_->on_cpu() && opt_.cpu_eager_us_per_1k_tokens > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(opt_.cpu_eager_us_per_1k_tokens *
                                                            args.shape().token_budget / 1024));
  }

 protected:
  // toy_dual's post-processing: item k's "rows" are the global row k, then its
  // local rows (if it used the local path); its "pooled" row is the mean of
  // the "rows" just written (stream order).
  void assemble(const sdk::PostprocessArgs<Item>& args) const {
    if (args.num_paths() != 2) sdk::invalid("expected two path outputs");
    if (args.num_outputs() != info_.num_outputs())
      sdk::invalid("expected " + std::to_string(info_.num_outputs()) + " outputs, got " +
                   std::to_string(args.num_outputs()));
    const size_t row_bytes = static_cast<size_t>(opt_.hidden) * sizeof(float);
    const char* global = static_cast<const char*>(args.output_data(0, kRows));
    const char* local =
        args.path_used(1) ? static_cast<const char*>(args.output_data(1, kRows)) : nullptr;
    int64_t local_row = 0;
    for (int64_t k = 0; k < args.num_items(); ++k) {
      char* dst = static_cast<char*>(args.result_data(kRows, k));
      backend_->copy(dst, global + k * row_bytes, row_bytes, args.stream());
      const int64_t t = path_tokens(opt_, form_, args.items()[k], 1);
      if (t == 0) continue;
      if (!local) sdk::fail(EG_ERR_INTERNAL, "local path output missing");
      backend_->copy(dst + row_bytes, local + local_row * row_bytes,
                     static_cast<size_t>(t) * row_bytes, args.stream());
      local_row += t;
    }
    for (int64_t k = 0; args.num_outputs() > kPooled && k < args.num_items(); ++k)
      backend_->mean_rows(static_cast<float*>(args.result_data(kPooled, k)),
                          static_cast<const float*>(args.result_data(kRows, k)),
                          args.result<float>(kRows, k).rows(), opt_.hidden, args.stream());
  }

 private:
  Form form_;
  Options opt_;  // before the backend and the description, which are made from it
  std::unique_ptr<Backend> backend_;
  sdk::ModelInfo info_;
};

}  // namespace toy
