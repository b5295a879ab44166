// Where the vision side runs: the CPU fp32 model, or the CUDA bf16 model when
// the plugin is built with its kernels. One type, so the plugin's model class
// holds no device branches and no #ifdef.
#pragma once

#include "dsocr2_config.hpp"
#include "dsocr2_cuda_model.hpp"
#include "dsocr2_layout.hpp"
#include "dsocr2_weights.hpp"

#include <encoder_kit/device_backend.hpp>

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dsocr2 {

// The CUDA model in a build with the kernels, else encoder_kit::NoCuda.
using Cuda = encoder_kit::CudaIfBuilt<CudaModel>;

// The devices this build can run on (the plugin's identity).
inline constexpr uint32_t kDevices = encoder_kit::kDevicesOf<Cuda>;

class Backend {
 public:
  // Loads the weights (`weights`: a checkpoint path or "random") onto
  // `device`, logging what was loaded. Throws Error(UNSUPPORTED) for an
  // unknown device, or CUDA in a build without the kernels.
  Backend(const Options& o, const std::string& weights, int32_t device, int32_t device_index);

  // Scratch for `views` views of `side` pixels (the CPU model keeps its own).
  size_t workspace_bytes(int64_t side, int64_t views) const;
  // A graph of `capacity` views of `side` pixels: `buffers` in Buffer order,
  // `out` [capacity * view tokens, text_hidden_size]. `tune`: the CUDA
  // products time their algorithms at this size first (graph warm-ups).
  void forward(int64_t side, int64_t capacity, const eg_tensor* buffers, void* out, void* workspace,
               size_t workspace_bytes, void* stream, bool tune);
  // One image's rows into `out`: its crops' rows from `local` (row
  // `local_row` on), its global rows from `global` (row `global_row` on), then
  // view_separator; device copies on `stream` for CUDA.
  void assemble(const ItemData& item, const void* local, int64_t local_row, const void* global,
                int64_t global_row, void* out, void* stream) const;

 private:
  const ModelConfig& m_;
  encoder_kit::DeviceBackend<std::unique_ptr<CpuModel>, Cuda> device_;
};

}  // namespace dsocr2
