// cuTensorMapEncodeTiled, the driver call that describes a global tensor to the
// TMA unit, shared by the Hopper kernels that load by TMA (gemm_sm90.cu,
// attention_sm90_tma.cu). Found through the runtime, so nothing links against
// libcuda; defined in gemm_sm90.cu.
#pragma once

#include <encoder_kit/cuda/kernels.hpp>  // bf16

#include <cuda.h>
#include <cudaTypedefs.h>

namespace encoder_kit::cuda::detail {

// Null when the driver lacks it (the TMA kernels are then not offered).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

// A bf16 tensor of `rank` dimensions (dims[0] innermost; strides in bytes for
// dims 1 and up) moved in boxes of `box` elements, swizzled as asked; boxes
// read zeros outside the tensor. 0, or an error code (no encoder in the
// driver, or arguments it rejects) recorded as everywhere in the kit.
int encode_bf16_tiled(CUtensorMap* map, const bf16* data, unsigned rank, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion l2_promotion);

}  // namespace encoder_kit::cuda::detail
