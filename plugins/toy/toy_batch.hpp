// The toy's items and graph layout: what an item holds, how many rows it sends
// down each path, the buffers' shapes, and a batch written into host staging.
//
// Buffers (rows first): x [budget, hidden] (zero padding), cu_seqlens
// [max_seqs + 1] (repeat-last: padded entries are empty sequences), num_seqs
// (a scalar), seq_id [budget] (padded with -1 by the plugin's callback), bias
// [1] (written at capture only), frame_first_row [frames + 1] (the first row
// of each video frame, then the batch's rows; repeat-last).
#pragma once

#include "toy_config.hpp"

#include <encgraph/plugin_api.h>
#include <encgraph/sdk/item.hpp>
#include <encgraph/sdk/tensor.hpp>

#include <cstdint>
#include <vector>

namespace toy {

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
encgraph::sdk::ItemSpec spec_of(const Options& o, Form form, const Item& it);

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
                 const std::vector<const Item*>& items, encgraph::sdk::StagingSet& buffers);
// Capture inputs: max_batch_size sequences of drawn values splitting the
// budget, like a full batch, and the bias.
void stage_capture(const Options& o, const eg_graph_shape& s, encgraph::sdk::StagingSet& buffers);

}  // namespace toy
