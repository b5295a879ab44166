// cuTensorMapEncodeTiled, the driver call that describes a global tensor to the
// TMA unit, shared by the Hopper kernels that load by TMA (gemm_sm90.cu,
// attention_sm90_tma.cu). Found through the runtime, so nothing links against
// libcuda; defined in gemm_sm90.cu.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace encoder_kit::cuda::detail {

// Null when the driver lacks it (the TMA kernels are then not offered).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

}  // namespace encoder_kit::cuda::detail
