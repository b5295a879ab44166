#include "siglip_batch.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/numeric.hpp>
#include <encoder_kit/staging_copies.hpp>

#include <algorithm>
#include <cstring>
#include <string>

namespace siglip {

Capacity capacity_for(const Options& o, const eg_graph_shape& shape) {
  const int64_t t = o.model.tokens_per_image();
  const int64_t budget = std::max<int64_t>(shape.token_budget, 1);
  Capacity cap;
  if (o.pooled()) {  // budgets count images
    cap.images = budget;
    cap.rows = budget * t;
  } else {  // budgets count patch tokens
    // A budget below one image (a user's list may hold one) still gets one
    // partial sequence, so the graph is valid; no real batch will use it.
    cap.images = std::max<int64_t>(budget / t, 1);
    cap.rows = budget;
  }
  return cap;
}

ItemData make_item_data(const Options& o, const std::vector<float>& rows) {
  ItemData d;
  encoder_kit::keep_rows(o.dtype != Dtype::F32, rows, d.rows_f32, d.rows_bf16);
  return d;
}

StagedRows stage_batch(const Options& o, const Capacity& cap,
                       const std::vector<const ItemData*>& items, void* pixels,
                       int32_t* cu_seqlens) {
  const int64_t t = o.model.tokens_per_image(), cols = o.model.patch_cols();
  const int64_t n = static_cast<int64_t>(items.size());
  if (n > cap.images || n * t > cap.rows)
    encoder_kit::fail(EG_ERR_INVALID_ARGUMENT, "siglip: a batch of " + std::to_string(n) +
                                                   " images (" + std::to_string(n * t) +
                                                   " patch rows) does not fit a graph of " +
                                                   std::to_string(cap.images) + " images and " +
                                                   std::to_string(cap.rows) + " rows");
  const size_t elem = o.dtype == Dtype::F32 ? 4 : 2;
  const size_t image_bytes = static_cast<size_t>(t * cols) * elem;
  char* dst = static_cast<char*>(pixels);
  cu_seqlens[0] = 0;
  encoder_kit::StagingCopies copies;  // run at once below
  for (int64_t k = 0; k < n; ++k) {
    const ItemData* it = items[static_cast<size_t>(k)];
    const void* src = o.dtype == Dtype::F32 ? static_cast<const void*>(it->rows_f32.data())
                                            : static_cast<const void*>(it->rows_bf16.data());
    copies.add(dst + static_cast<size_t>(k) * image_bytes, src, image_bytes);
    cu_seqlens[k + 1] = static_cast<int32_t>((k + 1) * t);
  }
  copies.run();
  return {n * t, n + 1};
}

std::vector<int32_t> capture_cu_seqlens(const Options& o, const Capacity& cap) {
  const int64_t t = o.model.tokens_per_image();
  std::vector<int32_t> cu(static_cast<size_t>(cap.images + 1), 0);
  for (int64_t s = 1; s <= cap.images; ++s) cu[s] = static_cast<int32_t>(std::min(cap.rows, s * t));
  return cu;
}

}  // namespace siglip
