// Where the toy runs: the CPU forward (toy_cpu_forward.hpp), or toy_kernels.cu
// when the plugin is built with CUDA (toy_cuda_backend.cpp; toy_no_cuda.cpp
// otherwise). One interface, so the model class holds no device branches and
// no #ifdef.
#pragma once

#include "toy_config.hpp"
#include "toy_cpu_forward.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace toy {

// The devices this build can run on (the plugins' identity).
#ifdef TOY_HAVE_CUDA
inline constexpr uint32_t kDevices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
inline constexpr uint32_t kDevices = EG_DEVICE_CPU;
#endif

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool on_cpu() const = 0;
  virtual void forward(const Options& o, const ForwardCall& call, void* stream) const = 0;
  // seq_id's padding: rows [rows, capacity) of `dst` set to -1.
  virtual void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void* stream) const = 0;
  // toy_dual's post-processing: a copy between outputs, and the mean of rows.
  virtual void copy(void* dst, const void* src, size_t bytes, void* stream) const = 0;
  virtual void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden,
                         void* stream) const = 0;
};

// The backend of `device`; CUDA selects `device_index` (cudaSetDevice) and is
// EG_ERR_UNSUPPORTED in a build without the kernels.
std::unique_ptr<Backend> make_backend(int32_t device, int32_t device_index);
// The CUDA one (toy_cuda_backend.cpp, or toy_no_cuda.cpp's refusal).
std::unique_ptr<Backend> make_cuda_backend(int32_t device_index);

}  // namespace toy
