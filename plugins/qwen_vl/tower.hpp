// A Qwen-VL vision tower as an encgraph plugin: one SDK model class for every
// version over its Spec (spec.hpp); a version's plugin file
// (qwen2_5_vl_plugin.cpp, qwen3_vl_plugin.cpp) adds only its identity.
//
// Items are images (grid_thw = [1, h/p, w/p] after the processor's resize to
// multiples of 2p) and videos (grid_t = ceil(frames / temporal_patch_size));
// each yields grid_t * h * w / 4 output tokens of out_hidden_size. Budgets
// count output tokens (the path's unit, "merged tokens"); a graph of budget B
// holds 4B patch rows, and its sequence tables are sized by the shape's
// max_frames_per_batch, which the runtime's packer keeps every batch within.
//
// Graph buffers (layout.hpp): pixel rows, the position embedding's corners and
// weights (PosEmbed::Interpolated), rotary cos/sin per patch, the cumulative
// patch offsets of full-attention sequences (one per temporal patch) and of
// windows (Attention::Windowed; repeat-last padding keeps padded entries
// empty), and the token order. Items are stored already in unit order, so the
// forward needs only the gather of output tokens at its end. Padded patch rows
// are zero and sit outside every sequence: rows never mix outside attention,
// and the gather reads real rows only, so padding cannot reach a real row.
//
// Outputs: "embeddings" (Outputs::Merger), or "pooler_output" (the merger's)
// then "deepstack_0..n-1" (the deepstack mergers' features in layer order),
// each [tokens, out_hidden_size] in the processor's token order.
//
// Weights: a .safetensors file, a checkpoint directory / index json (tensors
// under `visual.` or `model.visual.`, detected; others ignored), or "random".
// A checkpoint directory's config.json and processor configs configure the
// tower (docs/config.md).
#pragma once

#include "config.hpp"
#include "layout.hpp"
#include "weights.hpp"

#include <encgraph/sdk/sdk.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace qwen_vl {

class CudaModel;

// The devices every version runs on in this build.
#ifdef QWEN_VL_HAVE_CUDA
inline constexpr uint32_t kDevices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
inline constexpr uint32_t kDevices = EG_DEVICE_CPU;
#endif

class Tower {
 public:
  using Item = ItemData;

  Tower(const Spec& spec, sdk::CreateArgs& args);
  ~Tower();
  Tower(const Tower&) = delete;
  Tower& operator=(const Tower&) = delete;

  const sdk::ModelInfo& model_info() const { return info_; }
  sdk::BudgetRange budget_range() const { return {opt_.min_budget, opt_.max_budget}; }
  Item item_create(const eg_item_desc& d) const;
  sdk::ItemSpec item_spec(const Item& it) const;
  // The spec before any pixels exist (data-parallel balancing).
  sdk::ItemSpec item_spec_for_desc(const eg_item_desc& d) const;
  sdk::Shape buffer_shape(const eg_graph_shape& s, int32_t buffer) const;
  sdk::Shape output_shape(const eg_graph_shape& s, int32_t output) const;
  size_t workspace_size(const eg_graph_shape& s) const;
  void prepare_capture_staging(const eg_graph_shape& s, sdk::StagingSet& buffers);
  void prepare_replay_buffers(const eg_graph_shape& s, const sdk::Batch<Item>& items,
                              sdk::StagingSet& buffers);
  // The graph path's warm-up times the matrix products' algorithms for its
  // size (tune_gemm); eager runs (a new size each time) do not.
  void forward(const sdk::ForwardArgs& a) { run(a, opt_.tune_gemm); }
  void forward_eager(const sdk::ForwardArgs& a) { run(a, false); }

 private:
  // The grid an item of this description gets, after every check item_create
  // makes on its geometry: item_create and item_spec_for_desc both take it
  // from here, so the spec promised before decoding is the spec of the item made.
  Grid checked_grid(const eg_item_desc& d) const;
  sdk::ItemSpec spec_of(const Grid& g, int64_t frames) const;
  void run(const sdk::ForwardArgs& a, bool tune);

  Options opt_;
  Buffers buffers_;
  sdk::ModelInfo info_;
  Weights cpu_weights_;              // CPU instances
  std::unique_ptr<CudaModel> cuda_;  // CUDA instances
};

// A version's plugin class: the tower over spec S, with the identity I its
// table carries (ENCGRAPH_SDK_PLUGIN takes one class).
template <const Spec& S, const sdk::Identity& I>
class VersionTower : public Tower {
 public:
  static constexpr sdk::Identity identity = I;
  // Items are made from the options alone (no shared state): the runtime may
  // make a batch's items on several threads (ABI 1.4).
  static constexpr bool concurrent_items = true;
  explicit VersionTower(sdk::CreateArgs& args) : Tower(S, args) {}
};

}  // namespace qwen_vl
