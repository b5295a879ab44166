// Paths, items and rows: what each image sends down the `global` and `local`
// paths, how a batch's views are staged into a path's graph buffers, and how
// the two paths' outputs are assembled into get_image_features' per-image rows
// [local crop rows..., global rows, view_separator].
#pragma once

#include "dsocr2_config.hpp"
#include "dsocr2_preprocess.hpp"

#include <cstdint>
#include <vector>

namespace dsocr2 {

enum Path : int32_t { kGlobal = 0, kLocal = 1, kNumPaths = 2 };
// Graph buffers, the same list for both paths (shapes differ by path).
enum Buffer : int32_t {
  kPixels = 0,     // [views, 3 * side * side] f32, planar views; zero padding
  kViewCount = 1,  // [1] i32: the batch's real views on this path; zero padding
  kNumBuffers = 2
};

// The item a plugin keeps: its preprocessed views.
struct ItemData {
  Views views;
  // With bf16 staging (CUDA) the views are converted once, when the item is
  // made, and the float copies dropped: staging a batch is then a copy.
  std::vector<uint16_t> global_bf16, crops_bf16;
  void to_bf16();
  int64_t output_rows(const ModelConfig& m) const {
    return views.num_crops * m.local_tokens() + m.global_tokens() + 1;
  }
  // In the path's unit: the query tokens the path outputs for this item.
  int64_t path_tokens(const ModelConfig& m, int32_t path) const {
    return path == kGlobal ? m.global_tokens() : views.num_crops * m.local_tokens();
  }
};

int64_t view_side(const ModelConfig& m, int32_t path);
int64_t view_tokens(const ModelConfig& m, int32_t path);
// Views a graph of `token_budget` tokens on `path` holds.
int64_t view_capacity(const ModelConfig& m, int32_t path, int64_t token_budget);

// Copies the batch's views of `path` (items in batch order; an item with no
// crops adds nothing to the local path) into `pixels` (room for `capacity`
// views; f32, or bf16 with `bf16` for the CUDA path). Returns the views
// written; throws Error(INVALID_ARGUMENT) past capacity.
int64_t stage_views(const ModelConfig& m, int32_t path, const std::vector<const ItemData*>& items,
                    void* pixels, int64_t capacity, bool bf16 = false);

// One image's rows from the paths' outputs: `local` / `global` point at the
// item's first crop / view rows; `out` gets [crops*Lq + Gq + 1, H].
void assemble_item(const ModelConfig& m, const ItemData& item, const float* local,
                   const float* global, const float* view_separator, float* out);

}  // namespace dsocr2
