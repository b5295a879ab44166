// Where the toy runs: the CPU forward, or toy_kernels.cu when the plugin is
// built with CUDA. One type, so the model class holds no device branches and
// no #ifdef.
#pragma once

#include "toy_config.hpp"
#include "toy_cpu_forward.hpp"

#include <encgraph/plugin_api.h>

#include <cstddef>
#include <cstdint>

namespace toy {

// The devices this build can run on (the plugins' identity).
#ifdef TOY_HAVE_CUDA
inline constexpr uint32_t kDevices = EG_DEVICE_CPU | EG_DEVICE_CUDA;
#else
inline constexpr uint32_t kDevices = EG_DEVICE_CPU;
#endif

class Backend {
 public:
  // Selects `device` (CUDA: cudaSetDevice); CUDA in a build without the
  // kernels is EG_ERR_UNSUPPORTED.
  Backend(int32_t device, int32_t device_index);

  bool on_cpu() const { return device_ == EG_DEVICE_CPU; }
  void forward(const Options& o, const ForwardCall& call, void* stream) const;
  // seq_id's padding: rows [rows, capacity) of `dst` set to -1.
  void pad_seq_id(int32_t* dst, int64_t rows, int64_t capacity, void* stream) const;
  // toy_dual's post-processing: a copy between outputs, and the mean of rows.
  void copy(void* dst, const void* src, size_t bytes, void* stream) const;
  void mean_rows(float* dst, const float* src, int64_t rows, int64_t hidden, void* stream) const;

 private:
  int32_t device_;
};

}  // namespace toy
