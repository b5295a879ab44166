#include "dsocr2_layout.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>

#include <algorithm>

namespace dsocr2 {

int64_t view_side(const ModelConfig& m, int32_t path) {
  return path == kGlobal ? m.global_size : m.tile_size;
}

int64_t view_tokens(const ModelConfig& m, int32_t path) {
  return path == kGlobal ? m.global_tokens() : m.local_tokens();
}

int64_t view_capacity(const ModelConfig& m, int32_t path, int64_t token_budget) {
  if (path != kGlobal && path != kLocal)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: no path " + std::to_string(path));
  return std::max<int64_t>(token_budget, 0) / view_tokens(m, path);
}

int64_t stage_views(const ModelConfig& m, int32_t path, const std::vector<const ItemData*>& items,
                    void* pixels, int64_t capacity, bool bf16) {
  const int64_t side = view_side(m, path), per_view = 3 * side * side;
  int64_t views = 0;
  for (const ItemData* it : items) {
    const int64_t n = path == kGlobal ? 1 : it->views.num_crops;
    if (views + n > capacity)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        "deepseek_ocr2: the batch has more than " + std::to_string(capacity) +
                            (path == kGlobal ? " global views" : " local crops") +
                            ", the graph's capacity");
    const float* src = path == kGlobal ? it->views.global.data() : it->views.crops.data();
    if (bf16) {
      uint16_t* dst = static_cast<uint16_t*>(pixels) + views * per_view;
      for (int64_t k = 0; k < n * per_view; ++k) dst[k] = encoder_kit::f32_to_bf16(src[k]);
    } else {
      std::copy_n(src, n * per_view, static_cast<float*>(pixels) + views * per_view);
    }
    views += n;
  }
  return views;
}

void assemble_item(const ModelConfig& m, const ItemData& item, const float* local,
                   const float* global, const float* view_separator, float* out) {
  const int64_t H = m.text_hidden_size;
  const int64_t local_rows = item.views.num_crops * m.local_tokens();
  if (local_rows > 0) out = std::copy_n(local, local_rows * H, out);
  out = std::copy_n(global, m.global_tokens() * H, out);
  std::copy_n(view_separator, H, out);
}

}  // namespace dsocr2
