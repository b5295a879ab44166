// What the versions' CUDA forwards share: error reporting named after the
// plugin, the weights in one device allocation, the cuBLASLt handle and
// tuning cache, and the forward's preamble (workspace check, products planned
// outside capture, tuned once per size in the warm-up).
#pragma once

#include "forward.hpp"
#include "layout.hpp"

#include <encoder_kit/cuda/device_weights.hpp>
#include <encoder_kit/cuda/fp8.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/tuning_cache.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace qwen_vl {

namespace k = encoder_kit::cuda;
using k::bf16;
using Epilogue = k::GemmPlan::Epilogue;

// Activations of one forward, carved from the runtime's workspace.
struct Activations {
  bf16 *x, *normed, *qkv, *attn;  // attn: also a merger's hidden [tokens, 4d]
  bf16* gate_up;                  // cuBLASLt's [gate | up] product (Mlp::GatedSilu)
  bf16* act;                      // [patches, inter]
  bf16* merged;                   // a merger's output in unit order, before the gather
  // precision = "fp8_linear": a product's activation operand as e4m3 codes
  // [patches, max(d, mlp)] and its rows' scales (null otherwise).
  uint8_t* q;
  float* q_scale;
  void* gemm_ws;
  size_t total;
};

// The graph buffers on the device (null where the version has none).
struct Inputs {
  const bf16* pixels;
  const int32_t* pos_index;
  const float *pos_weight, *cos, *sin;
  const int32_t *cu_seqlens, *cu_windows, *token_index;
};

// One forward's activations, inputs, stream and sizes: what every launch reads.
struct Pass {
  Capacity cap;
  Activations a;
  Inputs in;
  cudaStream_t s;
  int64_t p, tokens, d;  // patch rows, output tokens, hidden size
  int heads, hd;
  float scale;  // attention's 1 / sqrt(head_dim)
  size_t gemm_ws;
};

class CudaTower : public CudaModel {
 public:
  size_t workspace_bytes(const Capacity& cap) const final { return carve(cap, nullptr).total; }
  // Checks what the runtime passed, plans (and with `tune` times) the
  // products for this size, then runs the version's launches.
  void forward(const Capacity& cap, const eg_tensor* buffers, void* const* outputs, int num_outputs,
               void* workspace, size_t workspace_bytes, void* stream, bool tune) final;

 protected:
  // Selects the device and refuses a head_dim the attention kernel lacks.
  // `mlp`: the MLP width on the device (the version's padding of it).
  CudaTower(const VisionConfig& c, int device_index, int64_t mlp);
  ~CudaTower() override;

  // precision = "fp8_linear": refuses a GPU without FP8 tensor cores and a
  // hidden_size the FP8 products cannot take, naming the fix.
  void require_fp8() const;

  void check(int rc, const char* what) const;
  void check_cuda(cudaError_t e, const char* what) const;
  [[noreturn]] void fail(eg_status status, const std::string& message) const;

  // After the version's own checks: the weights uploaded, the cuBLASLt
  // handle, the tuning cache (tuning_cache, "off" without tune_gemm) and the
  // products planned for max_budget tokens.
  void start(const Options& o, const Weights& w, Warn warn);
  // The version's device weights, added to `weights` and uploaded.
  virtual void upload(const Weights& w) = 0;

  // Plans every product for `patches` rows (the MLP's through plan_mlp);
  // they share the tuning cache, and nothing is tuned for them yet.
  void plan_products(int64_t patches);
  // The version's MLP products, planned.
  virtual std::array<k::GemmPlan*, 2> plan_mlp(int64_t patches) = 0;
  // Times each product's candidates at this size on scratch memory (the
  // forward that follows recomputes everything); once per size, outside capture.
  // The patch embedding's is timed first, here; then the version's.
  virtual void tune_products(const Activations& a, int64_t p, int64_t tokens, size_t ws,
                             cudaStream_t s) = 0;
  // The version's launches.
  virtual void run(const Pass& f, void* const* outputs) = 0;

  // The activations in `workspace` (null: only their size), the gate/up
  // product's room only with gate_up_room.
  Activations carve(const Capacity& cap, char* workspace) const;
  Inputs inputs(const eg_tensor* buffers) const;
  // `v` ([rows, intermediate_size]) with zero columns up to mlp_width; a padded
  // copy lives in `store`.
  const std::vector<float>& pad_cols(const std::vector<float>& v, int64_t rows,
                                     std::deque<std::vector<float>>& store) const;

  k::GemmPlan patch, qkv, proj, merge1, merge2;       // the MLP's are the version's
  const bf16 *patch_w = nullptr, *patch_b = nullptr;  // patch_b: Spec::patch_bias
  VisionConfig c;
  std::string who;  // "<plugin> CUDA": leads every error message
  int device = 0;
  const Buffers buffers{*c.spec};
  int64_t mlp_width = 0;      // the MLP width on the device
  bool gate_up_room = false;  // carve room for cuBLASLt's [gate | up] product
  bool fp8_room = false;      // carve room for the FP8 products' operands
  k::DeviceWeights weights;   // one allocation for every parameter
  cublasLtHandle_t handle = nullptr;
  int64_t planned_patches = 0;
  std::set<int64_t> tuned;  // patch counts whose algorithms were timed
  // tune_products' choices across processes (the tuning_cache key); null: off.
  std::shared_ptr<encoder_kit::TuningCache> gemm_cache;
};

// The versions' forwards (cuda_window_tower.cpp, cuda_deepstack_tower.cpp,
// cuda_downsample_tower.cpp).
std::unique_ptr<CudaModel> make_window_tower(const Options& o, const Weights& w, int device_index,
                                             Warn warn);
std::unique_ptr<CudaModel> make_deepstack_tower(const Options& o, const Weights& w,
                                                int device_index, Warn warn);
std::unique_ptr<CudaModel> make_downsample_tower(const Options& o, const Weights& w,
                                                 int device_index, Warn warn);

}  // namespace qwen_vl
