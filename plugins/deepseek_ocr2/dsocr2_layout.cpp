#include "dsocr2_layout.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cstring>

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

void ItemData::to_bf16() {
  auto convert = [](std::vector<float>& from, std::vector<uint16_t>& to) {
    to.resize(from.size());
    for (size_t k = 0; k < from.size(); ++k) to[k] = encoder_kit::f32_to_bf16(from[k]);
    std::vector<float>().swap(from);
  };
  convert(views.global, global_bf16);
  convert(views.crops, crops_bf16);
}

int64_t stage_views(const ModelConfig& m, int32_t path, const std::vector<const ItemData*>& items,
                    void* pixels, int64_t capacity, bool bf16) {
  const int64_t side = view_side(m, path), per_view = 3 * side * side;
  const size_t elem = bf16 ? sizeof(uint16_t) : sizeof(float);
  // A request of pages is hundreds of MB, which one thread copies into
  // pinned memory far slower than the device then reads it: the pool's
  // threads copy it (StagingCopies).
  encoder_kit::StagingCopies copies;
  char* dst = static_cast<char*>(pixels);
  int64_t views = 0;
  for (const ItemData* it : items) {
    const int64_t n = path == kGlobal ? 1 : it->views.num_crops;
    if (views + n > capacity)
      encoder_kit::fail(EG_ERR_INVALID_ARGUMENT,
                        "deepseek_ocr2: the batch has more than " + std::to_string(capacity) +
                            (path == kGlobal ? " global views" : " local crops") +
                            ", the graph's capacity");
    const void* src = nullptr;
    size_t have = 0;
    if (bf16) {
      const std::vector<uint16_t>& v = path == kGlobal ? it->global_bf16 : it->crops_bf16;
      src = v.data();
      have = v.size();
    } else {
      const std::vector<float>& v = path == kGlobal ? it->views.global : it->views.crops;
      src = v.data();
      have = v.size();
    }
    if (static_cast<int64_t>(have) != n * per_view)
      encoder_kit::fail(EG_ERR_INTERNAL, std::string("deepseek_ocr2: an item's ") +
                                             (bf16 ? "bf16 " : "") + "views were not made");
    const size_t offset = static_cast<size_t>(views * per_view) * elem;
    const size_t bytes = static_cast<size_t>(n * per_view) * elem;
    copies.add(dst + offset, src, bytes);
    views += n;
  }
  copies.run();
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
