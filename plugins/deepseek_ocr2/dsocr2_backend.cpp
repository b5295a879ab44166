#include "dsocr2_backend.hpp"

#include "dsocr2_weights.hpp"

#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/weights.hpp>

#include <encgraph/sdk/host.hpp>

#include <cstring>
#include <utility>

namespace dsocr2 {

using encoder_kit::fail;

Backend::Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index)
    : m_(o.model), device_("deepseek_ocr2", device) {
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
    device_.hold_cpu(std::make_unique<CpuModel>(c, std::move(w)));
    return;
  }
  device_.make_cuda(c, w, device_index, o.max_budget,
                    encoder_kit::gemm_tuning_cache(o.tune_gemm, o.tuning_cache),
                    encoder_kit::host_warn());
}

size_t Backend::workspace_bytes(int64_t side, int64_t views) const {
  return device_.run([](const std::unique_ptr<CpuModel>&) { return size_t{0}; },
                     [&](const auto& m) { return m.workspace_bytes(side, views); });
}

void Backend::forward(int64_t side, int64_t capacity, const eg_tensor* buffers, void* out,
                      void* workspace, size_t workspace_bytes, void* stream, bool tune) {
  device_.run(
      [&](const std::unique_ptr<CpuModel>& cpu) {
        int32_t views = 0;
        std::memcpy(&views, buffers[kViewCount].data, sizeof(views));
        if (views < 0 || views > capacity)
          fail(EG_ERR_INVALID_ARGUMENT, "deepseek_ocr2: view_count " + std::to_string(views) +
                                            " is outside the graph's [0, " +
                                            std::to_string(capacity) + "]");
        cpu->encode(static_cast<const float*>(buffers[kPixels].data), views, side,
                    static_cast<float*>(out));
      },
      [&](auto& m) {
        // The view count stays on the device: kernels skip padded views there.
        m.forward(side, capacity, buffers[kPixels].data,
                  static_cast<const int32_t*>(buffers[kViewCount].data), out, workspace,
                  workspace_bytes, stream, tune);
      });
}

void Backend::assemble(const ItemData& it, const void* local, int64_t local_row, const void* global,
                       int64_t global_row, void* out, void* stream) const {
  const int64_t H = m_.text_hidden_size;
  device_.run(
      [&](const std::unique_ptr<CpuModel>& cpu) {
        const auto* l = static_cast<const float*>(local);
        assemble_item(m_, it, l ? l + local_row * H : nullptr,
                      static_cast<const float*>(global) + global_row * H,
                      cpu->weights().view_separator.data(), static_cast<float*>(out));
      },
      [&](const auto& m) { m.assemble(it, local, local_row, global, global_row, out, stream); });
}

}  // namespace dsocr2
