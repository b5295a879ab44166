// A primary kernel for the dependent-launch test (test_graph_capture.cpp):
// it lets the next kernel on the stream start at once
// (griddepcontrol.launch_dependents), spins for about `delay_us`, and only then
// writes `value` into dst[0..n). A dependent kit kernel that touched memory
// before its griddepcontrol.wait would read dst's old contents.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace encoder_kit_test {

cudaError_t launch_trigger_then_write(__nv_bfloat16* dst, int64_t n, float value, int delay_us,
                                      cudaStream_t stream);

}  // namespace encoder_kit_test
