// A pre-norm transformer block with its four Linears in FP8, as the ViTs
// with LayerNorm and a GELU (tanh) MLP have it (Qwen3-VL, SigLIP):
//   x += proj(attention(qkv(LN1(x)))),  x += fc2(gelu_tanh(fc1(LN2(x))))
// Each product's operand is quantised per row inside the forward
// (quantize_rows_e4m3), its weight per output channel at load
// (DeviceWeights::add_e4m3); LayerNorm, attention and the residual stream stay
// bf16. The model supplies the attention (rotary, its sequence layout).
#pragma once

#include <encoder_kit/cuda/fp8.hpp>
#include <encoder_kit/cuda/kernels.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace encoder_kit::cuda {

// A Linear in FP8: codes [out, in] and a scale per output row; bias bf16.
struct Fp8Linear {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const bf16* bias = nullptr;
};

struct Fp8BlockWeights {
  const bf16 *ln1_w = nullptr, *ln1_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr;
  Fp8Linear qkv, proj, fc1, fc2;

  // The bf16 parts, once uploaded: the norms and the four biases.
  void set_bf16(const bf16* norm1_w, const bf16* norm1_b, const bf16* norm2_w, const bf16* norm2_b,
                const bf16* qkv_b, const bf16* proj_b, const bf16* fc1_b, const bf16* fc2_b) {
    ln1_w = norm1_w;
    ln1_b = norm1_b;
    ln2_w = norm2_w;
    ln2_b = norm2_b;
    qkv.bias = qkv_b;
    proj.bias = proj_b;
    fc1.bias = fc1_b;
    fc2.bias = fc2_b;
  }
};

// One forward's buffers: x the residual rows [rows, d] (updated in place),
// normed [rows, d], qkv [rows, 3d], attn [rows, d] (attention's output),
// act [rows, inter], q [rows, max(d, inter)] codes and q_scale [rows].
struct Fp8BlockBuffers {
  bf16 *x, *normed, *qkv, *attn, *act;
  uint8_t* q;
  float* q_scale;
  void* gemm_ws;  // GemmPlan::workspace_bytes()
};

class Fp8PreNormBlock {
 public:
  // The four products for up to m_max rows; d and inter multiples of 16.
  // Returns a kernels.hpp status (0, or what failed).
  int initialize(int64_t m_max, int64_t d, int64_t inter, float eps);

  // The block over `rows` rows; attention() runs qkv -> attn. With `tune`,
  // the products' algorithms are timed at this size on the block's own
  // operands instead (attention skipped: x is overwritten, the caller's
  // forward recomputes it); outside capture only. `what` receives the step
  // that failed.
  int run(cublasLtHandle_t handle, const Fp8BlockWeights& w, const Fp8BlockBuffers& b, int64_t rows,
          const std::function<int()>& attention, bool tune, cudaStream_t s, std::string& what);

 private:
  Fp8GemmPlan qkv_, proj_, fc1_, fc2_;
  int64_t d_ = 0, inter_ = 0;
  float eps_ = 0.0f;
};

}  // namespace encoder_kit::cuda
