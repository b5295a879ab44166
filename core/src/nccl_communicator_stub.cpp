// Built without NCCL: CPU ranks still work; CUDA ranks get a clear error.
#include "communicator.hpp"

#include <encgraph/error.hpp>

namespace encgraph {

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>&) {
  throw Error(ErrorKind::Device,
              "data parallel over CUDA devices needs NCCL, and this encgraph "
              "was built without it; use CPU ranks or rebuild with NCCL");
}

}  // namespace encgraph
