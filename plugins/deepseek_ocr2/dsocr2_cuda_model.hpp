// DeepSeek-OCR-2's vision side on CUDA in bf16 (fp32 accumulation), over the
// kit's kernels (plugins/encoder_kit/cuda/kernels.hpp: cuBLASLt products,
// LayerNorm, RMSNorm, SiLU-gate, GELU) and this plugin's (dsocr2_kernels.cu:
// im2col, windows, relative positions, the masked attention, rotary).
// Graph-safe: the batch's view count is read on the device, the shapes come
// from the graph's capacity, and nothing allocates or synchronises inside
// forward() while the stream is capturing. Views are independent from the
// patch embedding to the projector, so padded views (whatever they hold) never
// touch a real view's rows.
#pragma once

#include "dsocr2_config.hpp"
#include "dsocr2_layout.hpp"
#include "dsocr2_weights.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace dsocr2 {

class CudaModel {
 public:
  // Uploads the weights (bf16; position tables per view size) to device
  // `device_index` and plans the matrix products for graphs of up to
  // `max_budget` query tokens on either path (larger ones are planned on
  // demand, outside capture). `tuning_cache`: a folder, "off", or "" for the
  // default (encoder_kit/tuning_cache.hpp); `warn` gets its warnings.
  CudaModel(const ModelConfig& m, const Weights& w, int device_index, int64_t max_budget,
            const std::string& tuning_cache = "",
            std::function<void(const std::string&)> warn = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // Scratch for `views` views of `side` pixels (global_size or tile_size).
  size_t workspace_bytes(int64_t side, int64_t views) const;

  // `views` (the graph's capacity) views of `side` pixels: pixels bf16
  // [views, 3 * side * side], view_count a device int32 (the real views; the
  // rest is padding), out bf16 [views * view_tokens(side), text_hidden_size].
  // With `tune` (the warm-up before a capture), the products' algorithms are
  // timed for this size first; never while the stream is capturing.
  void forward(int64_t side, int64_t views, const void* pixels, const int32_t* view_count,
               void* out, void* workspace, size_t workspace_bytes, void* stream, bool tune);

  // One image's rows into `out` (bf16, device copies on `stream`): its crops'
  // rows from `local` (row `local_row` on), its global rows from `global` (row
  // `global_row` on), then view_separator.
  void assemble(const ItemData& item, const void* local, int64_t local_row, const void* global,
                int64_t global_row, void* out, void* stream) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsocr2
