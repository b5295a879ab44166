// An item's forward work, which the plugins report as eg_item_spec::input_size
// so that data-parallel ranks get equal work (encoder_kit/work_estimate.hpp):
// the FLOPs of the patch embedding, the blocks' products and attention, and
// the mergers, in patch-equivalents (units of one patch through the blocks'
// products). Attention is what makes large items dearer than their patch
// count: per block, 4 x hidden x the sum of len² over the sequences it attends
// within: the whole of each temporal patch in full-attention blocks (every
// block under Attention::Full; fullatt_block_indexes otherwise), the item's
// windows in the other blocks.
#pragma once

#include "config.hpp"
#include "layout.hpp"

#include <encoder_kit/work_estimate.hpp>

#include <cstdint>

namespace qwen_vl {

// FLOPs (2 per multiply-add) of one item's forward over `grid`.
encoder_kit::Flops item_flops(const VisionConfig& c, const Grid& grid);

// What one patch costs in the blocks' products (all depth of them): the unit.
int64_t patch_unit_flops(const VisionConfig& c);

// item_flops in patch-equivalents: what item_spec reports as input_size.
int64_t item_work(const VisionConfig& c, const Grid& grid);

}  // namespace qwen_vl
