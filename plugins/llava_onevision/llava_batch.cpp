#include "llava_batch.hpp"

#include "llava_tiling.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace llava_onevision {

Capacity capacity_for(const Options& o, int64_t token_budget) {
  (void)o;
  return {std::max<int64_t>(token_budget, 1)};  // budgets count tiles
}

ItemShape item_shape(const Options& o, const eg_item_desc& d) {
  if (d.modality == EG_MODALITY_VIDEO) return {d.frames, d.frames, video_plan(o, d.frames)};
  const ImageLayout l = image_layout(o, d.height, d.width);
  return {l.tiles(), 1, image_plan(o, l)};
}

ItemData make_item_data(const Options& o, ItemShape shape, const std::vector<float>& rows) {
  ItemData d;
  d.tiles = shape.tiles;
  d.frames = shape.frames;
  d.plan = std::move(shape.plan);
  encoder_kit::keep_rows(o.dtype != Dtype::F32, rows, d.rows_f32, d.rows_bf16);
  return d;
}

StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels, int32_t* cu_seqlens,
                       int32_t* pack_src, float* pack_weight) {
  const ModelConfig& c = o.model;
  int64_t tiles = 0, out = 0;
  for (const ItemData* it : items) {
    tiles += it->tiles;
    out += it->plan.rows();
  }
  if (tiles > cap.tiles || out > cap.out_rows(c))
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "llava_onevision: a batch of " + std::to_string(items.size()) + " items (" +
                          std::to_string(tiles) + " tiles) does not fit a graph of " +
                          std::to_string(cap.tiles) + " tiles");
  const size_t elem = o.dtype == Dtype::F32 ? 4 : 2;
  const size_t tile_bytes = static_cast<size_t>(c.rows_per_tile() * c.vision.patch_cols()) * elem;
  char* dst = static_cast<char*>(pixels);
  encoder_kit::StagingCopies copies;
  int64_t first_row = 0, row = 0;
  for (const ItemData* it : items) {
    const void* src = o.dtype == Dtype::F32 ? static_cast<const void*>(it->rows_f32.data())
                                            : static_cast<const void*>(it->rows_bf16.data());
    copies.add(dst, src, tile_bytes * static_cast<size_t>(it->tiles));
    dst += tile_bytes * static_cast<size_t>(it->tiles);
    const size_t n = it->plan.src.size();
    for (size_t k = 0; k < n; ++k) {
      const int32_t s = it->plan.src[k];
      pack_src[row * kTaps + static_cast<int64_t>(k)] =
          s == kNewlineRow ? s : static_cast<int32_t>(s + first_row);
    }
    std::copy_n(it->plan.weight.data(), n, pack_weight + row * kTaps);
    row += it->plan.rows();
    first_row += it->tiles * c.rows_per_tile();
  }
  copies.run();
  for (int64_t t = 0; t <= tiles; ++t) cu_seqlens[t] = static_cast<int32_t>(t * c.rows_per_tile());
  return {tiles * c.rows_per_tile(), tiles + 1, out};
}

std::vector<int32_t> full_cu_seqlens(const Options& o, const Capacity& cap) {
  std::vector<int32_t> cu(static_cast<size_t>(cap.tiles + 1));
  for (int64_t t = 0; t <= cap.tiles; ++t)
    cu[t] = static_cast<int32_t>(t * o.model.rows_per_tile());
  return cu;
}

void check_plan(const Options& o, const Capacity& cap, const int32_t* src, const float* weight) {
  const int64_t rows = cap.tower_rows(o.model), n = cap.out_rows(o.model) * kTaps;
  for (int64_t k = 0; k < n; ++k)
    if ((src[k] != kNewlineRow && (src[k] < 0 || src[k] >= rows)) || !std::isfinite(weight[k]))
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        "llava_onevision: pack_src[" + std::to_string(k / kTaps) + "][" +
                            std::to_string(k % kTaps) + "] = " + std::to_string(src[k]) +
                            " is neither a row of the " + std::to_string(rows) +
                            " projected rows nor the newline (-1), or its weight is not finite");
}

}  // namespace llava_onevision
