// Built when the CUDA toolkit is absent: the CPU backend still works and a CUDA
// request gets a clear error.
#include "device_backend.hpp"

#include <encgraph/error.hpp>

namespace encgraph {

std::shared_ptr<DeviceBackend> make_cuda_backend(int, bool) {
  throw Error(ErrorKind::Device,
              "this encgraph was built without CUDA; run on the CPU (runtime.device = \"cpu\", or "
              "\"cpu\" ranks in runtime.data_parallel) or rebuild with the CUDA toolkit installed");
}

int cuda_device_count() {
  return 0;
}

bool cuda_device_available() {
  return false;
}

}  // namespace encgraph
