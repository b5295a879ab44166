// The vision rotary of one pair, x1 = x[d] and x2 = x[d + head_dim/2], in fp32
// (transformers' apply_rotary_pos_emb_vision). rotary_bf16 and the fused
// window attention both rotate through this one function, so both round the
// same fp32 results to bf16.
#pragma once

namespace encoder_kit::cuda::detail {

__device__ __forceinline__ void rotate_pair(float x1, float x2, float c, float s, float& o1,
                                            float& o2) {
  o1 = x1 * c - x2 * s;
  o2 = x2 * c + x1 * s;
}

}  // namespace encoder_kit::cuda::detail
