// A build without CUDA: the toy refuses the device (toy_cuda_backend.cpp
// replaces this file when the kernels are built).
#include "toy_backend.hpp"

#include <encgraph/sdk/error.hpp>

namespace toy {

std::unique_ptr<Backend> make_cuda_backend(int32_t) {
  encgraph::sdk::fail(EG_ERR_UNSUPPORTED, "built without CUDA");
}

}  // namespace toy
