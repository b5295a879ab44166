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
// forward is toy_cpu_forward.hpp's. `scale` is the batch's capture-axis key (1
// without axes). Output "pooled" holds one row per item: the mean of the item's
// "rows" (toy_dual: of its global row and its local rows).
//
// Config keys (toy_config.hpp): hidden, patch, min_budget, max_budget,
// local_min_tokens, local_min_budget (toy_dual), max_frames_per_video,
// extra_kernels, cpu_us_per_1k_tokens, cpu_eager_us_per_1k_tokens,
// check_padding, pooled, bias, capture_axis_keys. No weights.
#pragma once

#include "toy_backend.hpp"
#include "toy_batch.hpp"
#include "toy_config.hpp"

#include <encgraph/sdk/sdk.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace toy {

namespace sdk = encgraph::sdk;

inline constexpr const char* kDescription =
    "position-dependent toy encoder for tests and overhead benchmarks";
inline constexpr uint32_t kModalities = EG_MODALITY_IMAGE | EG_MODALITY_VIDEO;

class Toy {
 public:
  using Item = toy::Item;

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
