#include "dsocr2_backend.hpp"

#include "dsocr2_weights.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/weights.hpp>

#include <encgraph/sdk/host.hpp>

#include <cstring>
#include <utility>

#ifdef DSOCR2_HAVE_CUDA
#include "dsocr2_cuda_model.hpp"

#include <cuda_runtime.h>
#else
namespace dsocr2 {
class CudaModel {};  // never made: CUDA is refused in the constructor
}  // namespace dsocr2
#endif

namespace dsocr2 {

using encoder_kit::fail;

Backend::Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index)
    : m_(o.model) {
#ifndef DSOCR2_HAVE_CUDA
  if (device == EG_DEVICE_CUDA)
    fail(EG_ERR_UNSUPPORTED,
         "deepseek_ocr2 was built without its CUDA kernels; use device = \"cpu\"");
  (void)device_index;
#endif
  if (device != EG_DEVICE_CPU && device != EG_DEVICE_CUDA)
    fail(EG_ERR_UNSUPPORTED,
         "deepseek_ocr2: unknown device " + std::to_string(device) + "; use cpu or cuda");
  const ModelConfig& c = o.model;
  const encoder_kit::WeightSource source(weights, o.seed, o.check_finite);
  Weights w =
      encoder_kit::naming_config_on_failure(o.config_path, [&] { return load_weights(c, source); });
  encgraph::sdk::host().info(
      "loaded " + source.description() +
      (source.is_random() ? std::string() : " (" + w.layout + ")") + " (SAM " +
      std::to_string(c.sam_layers) + "x" + std::to_string(c.sam_hidden_size) + ", encoder " +
      std::to_string(c.encoder_layers) + "x" + std::to_string(c.encoder_hidden()) + ", out " +
      std::to_string(c.text_hidden_size) + ")");
  if (device == EG_DEVICE_CPU) {
    cpu_ = std::make_unique<CpuModel>(c, std::move(w));
    return;
  }
#ifdef DSOCR2_HAVE_CUDA
  cuda_ = std::make_unique<CudaModel>(
      c, w, device_index, o.max_budget, o.tune_gemm ? o.tuning_cache : std::string("off"),
      [](const std::string& message) { encgraph::sdk::host().warn(message); });
#endif
}

Backend::~Backend() = default;

size_t Backend::workspace_bytes(int64_t side, int64_t views) const {
#ifdef DSOCR2_HAVE_CUDA
  if (cuda_) return cuda_->workspace_bytes(side, views);
#endif
  (void)side;
  (void)views;
  return 0;
}

void Backend::forward(int64_t side, int64_t capacity, const eg_tensor* buffers, void* out,
                      void* workspace, size_t workspace_bytes, void* stream, bool tune) {
#ifdef DSOCR2_HAVE_CUDA
  if (cuda_) {
    // The view count stays on the device: kernels skip padded views there.
    cuda_->forward(side, capacity, buffers[kPixels].data,
                   static_cast<const int32_t*>(buffers[kViewCount].data), out, workspace,
                   workspace_bytes, stream, tune);
    return;
  }
#endif
  (void)workspace;
  (void)workspace_bytes;
  (void)stream;
  (void)tune;
  int32_t views = 0;
  std::memcpy(&views, buffers[kViewCount].data, sizeof(views));
  if (views < 0 || views > capacity)
    fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: view_count " + std::to_string(views) +
                                      " is outside the graph's [0, " + std::to_string(capacity) +
                                      "]");
  cpu_->encode(static_cast<const float*>(buffers[kPixels].data), views, side,
               static_cast<float*>(out));
}

void Backend::assemble(const ItemData& it, const void* local, int64_t local_row, const void* global,
                       int64_t global_row, void* out, void* stream) const {
  const int64_t H = m_.text_hidden_size;
#ifdef DSOCR2_HAVE_CUDA
  if (cuda_) {
    // Device rows (bf16), copied on the runtime's stream.
    const auto s = static_cast<cudaStream_t>(stream);
    const size_t row = static_cast<size_t>(H) * 2;
    auto copy = [&](char* dst, const void* src, int64_t rows) {
      const cudaError_t e =
          cudaMemcpyAsync(dst, src, static_cast<size_t>(rows) * row, cudaMemcpyDeviceToDevice, s);
      if (e != cudaSuccess)
        fail(EG_ERR_DEVICE,
             std::string("deepseek_ocr2 CUDA: copying output rows: ") + cudaGetErrorString(e));
    };
    auto* dst = static_cast<char*>(out);
    const int64_t local_rows = it.views.num_crops * m_.local_tokens();
    if (local_rows > 0)
      copy(dst, static_cast<const char*>(local) + static_cast<size_t>(local_row) * row, local_rows);
    copy(dst + static_cast<size_t>(local_rows) * row,
         static_cast<const char*>(global) + static_cast<size_t>(global_row) * row,
         m_.global_tokens());
    copy(dst + static_cast<size_t>(local_rows + m_.global_tokens()) * row, cuda_->view_separator(),
         1);
    return;
  }
#endif
  (void)stream;
  const auto* l = static_cast<const float*>(local);
  assemble_item(m_, it, l ? l + local_row * H : nullptr,
                static_cast<const float*>(global) + global_row * H,
                cpu_->weights().view_separator.data(), static_cast<float*>(out));
}

}  // namespace dsocr2
