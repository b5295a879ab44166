// A pre-norm transformer block with its Linears in FP8, as the ViTs with
// LayerNorm and a GELU MLP have it (Qwen3-VL, SigLIP, InternViT):
//   x += proj(attention(qkv(LN1(x)))),  x += fc2(gelu(fc1(LN2(x))))
// qkv, fc1 and fc2 run in FP8: each operand quantised per row inside the
// forward, each weight per output channel at load (add_fp8_block). proj
// stays bf16: quantising attention's output costs more than its FP8 product
// saves (bench_kernels --only fp8). The two LayerNorms run inside
// the quantisation: their weights and biases are folded into qkv and fc1
// (fold_layer_norm), and the centred row's codes carry rstd in their scale
// (quantize_centred_rows_e4m3). Attention and the residual stream stay bf16;
// the model supplies the attention (rotary, its sequence layout).
#pragma once

#include <encoder_kit/cuda/fp8.hpp>
#include <encoder_kit/cuda/kernels.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace encoder_kit::cuda {

// A Linear in FP8: codes [out, in] and a scale per output row; bias bf16.
struct Fp8Linear {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const bf16* bias = nullptr;
};

// A block's device weights: qkv and fc1 with their LayerNorm folded in.
struct Fp8BlockWeights {
  Fp8Linear qkv, fc1, fc2;
  const bf16 *proj_w = nullptr, *proj_b = nullptr;
};

class DeviceWeights;

// A block's host weights as the checkpoint holds them (float; Linear weights
// [out, in], fc1's rows and bias as the model pads them).
struct PreNormBlockHost {
  const std::vector<float>&ln1_w, &ln1_b, &qkv_w, &qkv_b, &proj_w, &proj_b;
  const std::vector<float>&ln2_w, &ln2_b, &fc1_w, &fc1_b, &fc2_w, &fc2_b;
};

// Adds a block to `weights`, with its places in `out` (set by upload()): the
// norms folded into copies of qkv and fc1, qkv, fc1 and fc2 quantised per
// output channel, proj and the biases bf16. d: the block's width (qkv's and
// fc1's rows follow from their sizes); names: the three FP8 weights' tensor
// names (qkv, fc1, fc2) for errors. Throws encoder_kit::Error.
void add_fp8_block(DeviceWeights& weights, Fp8BlockWeights& out, const PreNormBlockHost& h,
                   int64_t d, const std::array<std::string, 3>& names);

// One forward's buffers: x the residual rows [rows, d] (updated in place),
// qkv [rows, 3d], attn [rows, d] (attention's output; fc2's once proj has
// read it), act [rows, inter], q [rows, max(d, inter)] codes and q_scale
// [rows].
struct Fp8BlockBuffers {
  bf16 *x, *qkv, *attn, *act;
  uint8_t* q;
  float* q_scale;
  void* gemm_ws;  // GemmPlan::workspace_bytes()
};

// Throws encoder_kit::Error (INVALID_ARGUMENT: the user's to fix) led by
// `who` ("siglip CUDA") when this GPU or a block's widths cannot run
// Fp8PreNormBlock: no FP8 tensor cores, d or inter not a multiple of 16,
// d over detail::kHeldRowCols, and with the exact GELU (gelu_tanh false)
// inter over it too. The towers call it at start-up.
void require_fp8_block(const std::string& who, int64_t d, int64_t inter, bool gelu_tanh);

class Fp8PreNormBlock {
 public:
  // The three FP8 products for up to m_max rows; d and inter multiples of
  // 16, d at most detail::kHeldRowCols. eps: the LayerNorms'. gelu_tanh:
  // GELU's tanh form in fc1's epilogue; otherwise the exact one, inside the
  // quantisation of fc1's output (gelu_quantize_rows_e4m3: inter at most
  // detail::kHeldRowCols). Returns a kernels.hpp status (0, or what failed).
  int initialize(int64_t m_max, int64_t d, int64_t inter, float eps, bool gelu_tanh = true);

  // The block over `rows` rows; attention() runs qkv -> attn; proj: the
  // model's bf16 plan for attn.proj (bias and residual; the model's tuning
  // cache keeps its choices). With `tune`, the products' algorithms are timed
  // at this size on the block's own operands instead (attention skipped: x is
  // overwritten, the caller's forward recomputes it); outside capture only.
  // `what` receives the step that failed.
  int run(cublasLtHandle_t handle, const Fp8BlockWeights& w, GemmPlan& proj,
          const Fp8BlockBuffers& b, int64_t rows, const std::function<int()>& attention, bool tune,
          cudaStream_t s, std::string& what);

 private:
  Fp8GemmPlan qkv_, fc1_, fc2_;
  int64_t d_ = 0, inter_ = 0;
  float eps_ = 0.0f;
  bool gelu_tanh_ = true;
};

}  // namespace encoder_kit::cuda
