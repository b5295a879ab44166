#include "internvl_batch.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <string>

namespace internvl {

Capacity capacity_for(const Options& o, int64_t token_budget) {
  // A budget below one tile (a user's list may hold one) still gets a tile.
  return {std::max<int64_t>(token_budget / o.model.rows_per_tile(), 1)};
}

ItemData make_item_data(const Options& o, int64_t tiles, const std::vector<float>& rows) {
  ItemData d;
  d.tiles = tiles;
  encoder_kit::keep_rows(o.dtype != Dtype::F32, rows, d.rows_f32, d.rows_bf16);
  return d;
}

StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels,
                       int32_t* cu_seqlens) {
  const ModelConfig& c = o.model;
  int64_t tiles = 0;
  for (const ItemData* it : items) tiles += it->tiles;
  if (tiles > cap.tiles)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                      "internvl: a batch of " + std::to_string(items.size()) + " images (" +
                          std::to_string(tiles) + " tiles) does not fit a graph of " +
                          std::to_string(cap.tiles) + " tiles");
  const size_t elem = o.dtype == Dtype::F32 ? 4 : 2;
  const size_t tile_bytes = static_cast<size_t>(c.patches_per_tile() * c.patch_cols()) * elem;
  char* dst = static_cast<char*>(pixels);
  encoder_kit::StagingCopies copies;
  for (const ItemData* it : items) {
    const void* src = o.dtype == Dtype::F32 ? static_cast<const void*>(it->rows_f32.data())
                                            : static_cast<const void*>(it->rows_bf16.data());
    copies.add(dst, src, tile_bytes * static_cast<size_t>(it->tiles));
    dst += tile_bytes * static_cast<size_t>(it->tiles);
  }
  copies.run();
  for (int64_t t = 0; t <= tiles; ++t) cu_seqlens[t] = static_cast<int32_t>(t * c.seq_per_tile());
  return {tiles * c.patches_per_tile(), tiles + 1};
}

std::vector<int32_t> full_cu_seqlens(const Options& o, const Capacity& cap) {
  std::vector<int32_t> cu(static_cast<size_t>(cap.tiles + 1));
  for (int64_t t = 0; t <= cap.tiles; ++t) cu[t] = static_cast<int32_t>(t * o.model.seq_per_tile());
  return cu;
}

int64_t check_cu_seqlens(const Options& o, const Capacity& cap, const int32_t* cu, int64_t n) {
  const int64_t seq = o.model.seq_per_tile();
  int64_t tiles = 0;
  for (int64_t s = 0; s <= n; ++s) {
    const int64_t prev = s ? cu[s - 1] : 0;
    const bool whole = cu[s] == prev + seq && prev == tiles * seq;
    if (s > cap.tiles || (s > 0 && !whole && cu[s] != prev) || (s == 0 && cu[0] != 0))
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        "internvl: cu_seqlens[" + std::to_string(s) +
                            "] = " + std::to_string(cu[s]) + " is neither the next whole tile of " +
                            std::to_string(seq) + " rows nor a repeat (graph of " +
                            std::to_string(cap.tiles) + " tiles)");
    if (s > 0 && whole) ++tiles;
  }
  return tiles;
}

}  // namespace internvl
