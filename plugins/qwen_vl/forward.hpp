// The tower's two forwards. On the CPU in f32 (cpu_forward.cpp): the
// reference path and what CI runs; it reads the graph's buffers (see
// layout.hpp) and writes every output ([tokens, out_hidden] each: the
// merger's, then any deepstack features in layer order) in batch token order.
// On CUDA in bf16 with fp32 accumulation (CudaModel): each version's form has
// its own forward over the kit's kernels (plugins/encoder_kit/cuda/kernels.hpp),
// sharing their scaffolding (cuda_tower.hpp): cuda_window_tower.cpp
// (Qwen2.5-VL) and cuda_deepstack_tower.cpp (Qwen3-VL). Graph-safe: every
// per-batch value is read from the graph buffers on the device, and nothing
// allocates or synchronises inside forward() while a stream is capturing.
#pragma once

#include "config.hpp"
#include "layout.hpp"
#include "weights.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace qwen_vl {

size_t cpu_workspace_bytes(const VisionConfig& c, const Capacity& cap);

// `buffers` in Buffers order; `outputs`: 1 + num_deepstack() f32 arrays of
// [cap.tokens, out_hidden].
void cpu_forward(const VisionConfig& c, const Weights& w, const Capacity& cap,
                 const eg_tensor* buffers, float* const* outputs, void* workspace,
                 size_t workspace_bytes);

struct Spec;

class CudaModel {
 public:
  virtual ~CudaModel() = default;
  virtual size_t workspace_bytes(const Capacity& cap) const = 0;
  // `buffers` in Buffers order. `outputs`: the model info's outputs, bf16
  // [cap.tokens, out_hidden] each. With `tune` (the warm-up run before a
  // capture), the products' algorithms are timed for this size first; never
  // while the stream is capturing.
  virtual void forward(const Capacity& cap, const eg_tensor* buffers, void* const* outputs,
                       int num_outputs, void* workspace, size_t workspace_bytes, void* stream,
                       bool tune) = 0;
};

using Warn = std::function<void(const std::string&)>;

// Throws Error(UNSUPPORTED) when no CUDA forward runs this version's forms,
// or the plugin was built without its CUDA kernels: checked before the
// weights load.
void require_cuda_forward(const Spec& s);

// Uploads the weights as bf16 to device `device_index` and plans the matrix
// products for up to max_budget tokens (more are planned on demand, outside
// capture). The tuning_cache option (a folder, "off", or "" for the default
// folder; encoder_kit/tuning_cache.hpp; "off" without tune_gemm) keeps timed
// choices; `warn` gets the cache's warnings. Throws for an option this GPU
// cannot run (a fused mlp_kernel / qkv_kernel without Hopper) or a head_dim
// the attention kernel lacks.
std::unique_ptr<CudaModel> make_cuda_model(const Options& o, const Weights& w, int device_index,
                                           Warn warn);

}  // namespace qwen_vl
