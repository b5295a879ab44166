#include "layout.hpp"

#include "spec.hpp"

#include <encoder_kit/capture_values.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

namespace qwen_vl {

Buffers::Buffers(const Spec& s) {
  pixel_rows = count++;
  if (s.pos_embed != PosEmbed::None) {
    pos_index = count++;
    pos_weight = count++;
  }
  rope_cos = count++;
  rope_sin = count++;
  cu_seqlens = count++;
  if (s.attention == Attention::Windowed) cu_window_seqlens = count++;
  token_index = count++;
}

ItemData make_item_data(const Options& o, const Grid& grid, int64_t frames,
                        const std::vector<float>& rows) {
  const VisionConfig& c = o.model;
  ItemData d;
  d.grid = grid;
  d.frames = frames;
  WindowLayout layout = window_layout(c, grid);
  const int64_t dim = c.patch_dim(), mu = c.merge_unit(), half = c.head_dim() / 2;
  const size_t n = static_cast<size_t>(grid.patches() * dim);
  const size_t unit_values = static_cast<size_t>(mu * dim);
  if (o.dtype == Dtype::F32) {
    d.pixels_f32.assign(n, 0.0f);
    if (!rows.empty())
      for (size_t k = 0; k < layout.unit_order.size(); ++k)
        std::memcpy(d.pixels_f32.data() + k * unit_values,
                    rows.data() + static_cast<size_t>(layout.unit_order[k]) * unit_values,
                    unit_values * sizeof(float));
  } else {
    d.pixels_bf16.assign(n, 0);
    if (!rows.empty())
      for (size_t k = 0; k < layout.unit_order.size(); ++k) {
        const float* src = rows.data() + static_cast<size_t>(layout.unit_order[k]) * unit_values;
        uint16_t* dst = d.pixels_bf16.data() + k * unit_values;
        for (size_t i = 0; i < unit_values; ++i) dst[i] = encoder_kit::f32_to_bf16(src[i]);
      }
  }
  d.cos.resize(static_cast<size_t>(grid.patches() * half));
  d.sin.resize(d.cos.size());
  rotary_tables(c, grid, layout.unit_order, d.cos.data(), d.sin.data());
  if (c.spec->pos_embed != PosEmbed::None) {
    d.pos_index.resize(static_cast<size_t>(grid.patches() * pos_taps(*c.spec)));
    d.pos_weight.resize(d.pos_index.size());
    pos_embed_tables(c, grid, layout.unit_order, d.pos_index.data(), d.pos_weight.data());
  }
  d.window_patches = std::move(layout.window_patches);
  d.inverse = std::move(layout.inverse);
  return d;
}

StagedRows stage_batch(const Options& o, const std::vector<const ItemData*>& items,
                       const StagingTarget& t) {
  const VisionConfig& c = o.model;
  const int64_t dim = c.patch_dim(), half = c.head_dim() / 2;
  StagedRows s;
  int64_t frames = 0, windows = 0;
  for (const ItemData* it : items) {
    s.tokens += it->tokens(c);
    frames += it->grid.t;
    windows += static_cast<int64_t>(it->window_patches.size());
  }
  auto over = [&](const char* what, int64_t need, int64_t cap) {
    if (need > cap)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, std::string(o.spec().name) + ": batch needs " +
                                                     std::to_string(need) + " " + what +
                                                     " but the graph holds " + std::to_string(cap));
  };
  over("output tokens", s.tokens, t.cap.tokens);
  const bool windowed = o.spec().attention == Attention::Windowed;
  over(windowed ? "full-attention sequences (frames)" : "attention sequences (temporal patches)",
       frames, t.cap.frames);
  over("attention windows", windows, t.cap.windows);

  // Patch rows go in order of decreasing frame size (see full_attention_buckets);
  // output tokens stay in batch order, which the inverse index restores.
  std::vector<size_t> layout(items.size());
  std::iota(layout.begin(), layout.end(), size_t{0});
  std::stable_sort(layout.begin(), layout.end(), [&](size_t a, size_t b) {
    return items[a]->grid.h * items[a]->grid.w > items[b]->grid.h * items[b]->grid.w;
  });
  std::vector<int64_t> first_token(items.size() + 1, 0);
  for (size_t k = 0; k < items.size(); ++k)
    first_token[k + 1] = first_token[k] + items[k]->tokens(c);

  const size_t elem = o.dtype == Dtype::F32 ? 4 : 2;
  const int64_t taps = pos_taps(o.spec());
  char* pixels = static_cast<char*>(t.pixels);
  int64_t patch = 0;
  int64_t frame_row = 0, window_row = 0;
  t.cu_seqlens[0] = 0;
  if (windowed) t.cu_windows[0] = 0;
  encoder_kit::StagingCopies copies;  // the bulk (pixels, positions, cos, sin), run at once below
  for (size_t k : layout) {
    const ItemData* it = items[k];
    const int64_t np = it->grid.patches();
    const void* src = o.dtype == Dtype::F32 ? static_cast<const void*>(it->pixels_f32.data())
                                            : static_cast<const void*>(it->pixels_bf16.data());
    copies.add(pixels + static_cast<size_t>(patch * dim) * elem, src,
               static_cast<size_t>(np * dim) * elem);
    if (t.pos_index) {
      copies.add(t.pos_index + patch * taps, it->pos_index.data(),
                 it->pos_index.size() * sizeof(int32_t));
      copies.add(t.pos_weight + patch * taps, it->pos_weight.data(),
                 it->pos_weight.size() * sizeof(float));
    }
    copies.add(t.cos + patch * half, it->cos.data(), it->cos.size() * sizeof(float));
    copies.add(t.sin + patch * half, it->sin.data(), it->sin.size() * sizeof(float));
    const int64_t frame_patches = it->grid.h * it->grid.w;
    for (int64_t f = 0; f < it->grid.t; ++f, ++frame_row)
      t.cu_seqlens[frame_row + 1] = static_cast<int32_t>(patch + (f + 1) * frame_patches);
    int64_t offset = patch;
    for (int32_t wp : it->window_patches) {
      offset += wp;
      t.cu_windows[++window_row] = static_cast<int32_t>(offset);
    }
    const int64_t unit_base = patch / c.merge_unit();
    int32_t* inverse = t.token_index + first_token[k];
    for (size_t u = 0; u < it->inverse.size(); ++u)
      inverse[u] = static_cast<int32_t>(unit_base + it->inverse[u]);
    patch += np;
  }
  copies.run();
  s.patches = patch;
  s.frame_rows = frame_row + 1;
  s.window_rows = window_row + 1;
  return s;
}

CaptureTables capture_tables(const VisionConfig& c, const Capacity& cap) {
  CaptureTables t;
  t.cu_seqlens.assign(static_cast<size_t>(cap.frames + 1), 0);
  t.cu_windows.assign(static_cast<size_t>(cap.windows + 1), 0);
  // Typical frames covering the rows (see capture_values.hpp), windows as
  // long as a real window until the rows run out.
  const int64_t frame = encoder_kit::capture_sequence_patches(cap.max_frame_patches, cap.patches,
                                                              cap.frames, c.merge_unit());
  const int64_t window = std::max<int64_t>(cap.max_window_patches, c.merge_unit());
  for (int64_t s = 1; s <= cap.frames; ++s)
    t.cu_seqlens[s] = static_cast<int32_t>(std::min(cap.patches, t.cu_seqlens[s - 1] + frame));
  for (int64_t s = 1; s <= cap.windows; ++s)
    t.cu_windows[s] = static_cast<int32_t>(std::min(cap.patches, t.cu_windows[s - 1] + window));
  t.token_index.resize(static_cast<size_t>(cap.tokens));
  std::iota(t.token_index.begin(), t.token_index.end(), 0);
  return t;
}

}  // namespace qwen_vl
