// The pre-norm transformer layers of a ViT on CUDA (encoder_kit/prenorm_layer.hpp
// gives their form, host weights and CPU forward): every layer's device
// weights, the products' plans and the order of the steps, in one place for
// SigLIP (and so LLaVA-OneVision's tower) and InternViT.
//
// bf16: the norms are kit kernels; bias, GELU (tanh in cuBLASLt's epilogue,
// erf as a pass after it) and the residual adds ride in the products.
// precision = "fp8_linear": each layer runs on Fp8PreNormBlock (qkv, fc1 and
// fc2 in FP8, LayerNorm folded into the quantisation; LayerNorm only).
// The model supplies attention (its sequence layout) and the buffers.
#pragma once

#include <encoder_kit/cuda/fp8_block.hpp>
#include <encoder_kit/cuda/kernels.hpp>
#include <encoder_kit/cuda/model_context.hpp>
#include <encoder_kit/prenorm_layer.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>

namespace encoder_kit::cuda {

class DeviceWeights;

// One forward's buffers: x [rows, d] the residual stream (updated in place),
// normed [rows, d], qkv [rows, 3d], attn [rows, d] (attention's output), act
// [rows, inter]; with FP8, q [rows, max(d, inter)] codes and q_scale [rows]
// besides (null in bf16).
struct PreNormBuffers {
  bf16 *x, *normed, *qkv, *attn, *act;
  uint8_t* q;
  float* q_scale;
  void* gemm_ws;  // GemmPlan::workspace_bytes()
};

class PreNormLayers {
 public:
  // Refuses (Error INVALID_ARGUMENT, led by ctx.who()) what the kernels
  // cannot run: widths not multiples of 8, a head_dim the attention lacks;
  // with fp8, what require_fp8_block refuses and RMSNorm.
  PreNormLayers(const ModelContext& ctx, const PreNormForm& form, bool fp8);

  bool fp8() const { return fp8_; }
  size_t size() const { return layers_.size(); }

  // Adds a layer's weights to `weights` (their places set by its upload());
  // names: its qkv, fc1 and fc2 tensors, for FP8's errors.
  void add(DeviceWeights& weights, const PreNormLayerWeights& l,
           const std::array<std::string, 3>& names);

  // Plans the products for up to `rows` rows; the bf16 plans, for
  // ModelContext::planned (in FP8 only proj's is planned: the other three
  // stay empty, which ModelContext::planned passes over).
  std::array<GemmPlan*, 4> plan(int64_t rows);
  // The bf16 products' algorithm for `rows`, outside capture.
  void prepare(int64_t rows);
  // Times the products at `rows` on the first layer's weights (x, normed and
  // the products' outputs are overwritten: the forward that follows
  // recomputes them); outside capture.
  void tune(const ModelContext& ctx, const PreNormBuffers& b, int64_t rows, cudaStream_t s);
  // Layer i over `rows` rows; attention() reads b.qkv and writes b.attn.
  void run(const ModelContext& ctx, size_t i, const PreNormBuffers& b, int64_t rows,
           const std::function<int()>& attention, cudaStream_t s);

 private:
  struct Layer {
    const bf16 *n1_w = nullptr, *n1_b = nullptr, *qkv_w = nullptr, *qkv_b = nullptr;
    const bf16 *proj_w = nullptr, *proj_b = nullptr, *n2_w = nullptr, *n2_b = nullptr;
    const bf16 *fc1_w = nullptr, *fc1_b = nullptr, *fc2_w = nullptr, *fc2_b = nullptr;
    Fp8BlockWeights fp8;  // fp8: these instead of the bf16 norms and products
  };
  void norm(const ModelContext& ctx, const bf16* w, const bf16* b, const PreNormBuffers& buf,
            int64_t rows, cudaStream_t s, const char* what) const;
  void bf16_layer(const ModelContext& ctx, const Layer& l, const PreNormBuffers& b, int64_t rows,
                  const std::function<int()>* attention, cudaStream_t s);

  std::string who_;  // leads every error message
  PreNormForm form_;
  bool fp8_ = false;
  // DeviceWeights writes each place at upload(): a deque never moves a layer.
  std::deque<Layer> layers_;
  GemmPlan qkv_, proj_, fc1_, fc2_;
  Fp8PreNormBlock block8_;
};

}  // namespace encoder_kit::cuda
