// The warp-specialised Hopper attention kernel (attention_sm90_ws.cu), reached
// through varlen_attention_bf16_sm90's variants 3 and up (attention_sm90.cu
// checks the arguments and the device first).
#pragma once

#include <encoder_kit/cuda/kernels.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit::cuda::detail {

inline constexpr int kSm90WsAttentionConfigs = 4;
const char* sm90_ws_attention_config_name(int config);
int varlen_attention_bf16_sm90_ws(const bf16* qkv, const int32_t* cu_seqlens, int max_seqs,
                                  int max_seqlen, int num_heads, int head_dim, float scale,
                                  bf16* out, int config, cudaStream_t stream);

}  // namespace encoder_kit::cuda::detail
