#include "qwen3_batch.hpp"

#include <encoder_kit/capture_values.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

namespace qwen3 {

ItemData make_item_data(const Options& o, const Grid& grid, int64_t frames,
                        const std::vector<float>& rows) {
  const VisionConfig& c = o.model;
  ItemData d;
  d.grid = grid;
  d.frames = frames;
  const size_t n = static_cast<size_t>(grid.patches() * c.patch_dim());
  if (o.dtype == Dtype::F32) {
    d.pixels_f32 = rows.empty() ? std::vector<float>(n, 0.0f) : rows;
  } else {
    d.pixels_bf16.assign(n, 0);
    for (size_t i = 0; i < rows.size() && i < n; ++i)
      d.pixels_bf16[i] = encoder_kit::f32_to_bf16(rows[i]);
  }
  const size_t patches = static_cast<size_t>(grid.patches());
  d.pos_index.resize(patches * 4);
  d.pos_weight.resize(patches * 4);
  pos_embed_tables(c, grid, d.pos_index.data(), d.pos_weight.data());
  const size_t half = static_cast<size_t>(c.head_dim() / 2);
  d.cos.resize(patches * half);
  d.sin.resize(patches * half);
  rotary_tables(c, grid, d.cos.data(), d.sin.data());
  return d;
}

StagedRows stage_batch(const Options& o, const std::vector<const ItemData*>& items,
                       const StagingTarget& t) {
  const VisionConfig& c = o.model;
  const int64_t dim = c.patch_dim(), half = c.head_dim() / 2;
  StagedRows s;
  int64_t frames = 0;
  for (const ItemData* it : items) {
    s.tokens += it->tokens(c);
    frames += it->grid.t;
  }
  auto over = [&](const char* what, int64_t need, int64_t cap) {
    if (need > cap)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, std::string("qwen3_vl: batch needs ") +
                                                     std::to_string(need) + " " + what +
                                                     " but the graph holds " + std::to_string(cap));
  };
  over("output tokens", s.tokens, t.cap.tokens);
  over("attention sequences (temporal patches)", frames, t.cap.frames);

  std::vector<size_t> layout(items.size());
  std::iota(layout.begin(), layout.end(), size_t{0});
  std::stable_sort(layout.begin(), layout.end(), [&](size_t a, size_t b) {
    return items[a]->grid.h * items[a]->grid.w > items[b]->grid.h * items[b]->grid.w;
  });
  std::vector<int64_t> first_token(items.size() + 1, 0);
  for (size_t k = 0; k < items.size(); ++k)
    first_token[k + 1] = first_token[k] + items[k]->tokens(c);

  const size_t elem = o.dtype == Dtype::F32 ? 4 : 2;
  char* pixels = static_cast<char*>(t.pixels);
  int64_t patch = 0, seq = 0;
  t.cu_seqlens[0] = 0;
  encoder_kit::StagingCopies copies;  // the bulk (pixels, positions, cos, sin), run at once below
  for (size_t k : layout) {
    const ItemData* it = items[k];
    const int64_t np = it->grid.patches();
    const void* src = o.dtype == Dtype::F32 ? static_cast<const void*>(it->pixels_f32.data())
                                            : static_cast<const void*>(it->pixels_bf16.data());
    copies.add(pixels + static_cast<size_t>(patch * dim) * elem, src,
               static_cast<size_t>(np * dim) * elem);
    copies.add(t.pos_index + patch * 4, it->pos_index.data(),
               it->pos_index.size() * sizeof(int32_t));
    copies.add(t.pos_weight + patch * 4, it->pos_weight.data(),
               it->pos_weight.size() * sizeof(float));
    copies.add(t.cos + patch * half, it->cos.data(), it->cos.size() * sizeof(float));
    copies.add(t.sin + patch * half, it->sin.data(), it->sin.size() * sizeof(float));
    const int64_t frame_patches = it->grid.h * it->grid.w;
    for (int64_t f = 0; f < it->grid.t; ++f, ++seq)
      t.cu_seqlens[seq + 1] = static_cast<int32_t>(patch + (f + 1) * frame_patches);
    const int64_t unit_base = patch / c.merge_unit();
    int32_t* index = t.token_index + first_token[k];
    for (int64_t u = 0; u < it->tokens(c); ++u) index[u] = static_cast<int32_t>(unit_base + u);
    patch += np;
  }
  copies.run();
  s.patches = patch;
  s.seq_rows = seq + 1;
  return s;
}

CaptureTables capture_tables(const VisionConfig& c, const Capacity& cap) {
  CaptureTables t;
  t.cu_seqlens.assign(static_cast<size_t>(cap.frames + 1), 0);
  // Typical frames, not one over the whole budget (see capture_values.hpp).
  const int64_t frame = encoder_kit::capture_sequence_patches(cap.max_frame_patches, cap.patches,
                                                              cap.frames, c.merge_unit());
  for (int64_t s = 1; s <= cap.frames; ++s)
    t.cu_seqlens[static_cast<size_t>(s)] = static_cast<int32_t>(
        std::min(cap.patches, t.cu_seqlens[static_cast<size_t>(s - 1)] + frame));
  t.token_index.resize(static_cast<size_t>(cap.tokens));
  std::iota(t.token_index.begin(), t.token_index.end(), 0);
  return t;
}

}  // namespace qwen3
