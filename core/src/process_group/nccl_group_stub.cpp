// A build without NCCL: CUDA ranks of a multi-process job cannot exchange rows.
#include "nccl_group.hpp"

namespace encgraph {

struct NcclGroup::State {};

namespace {
[[noreturn]] void no_nccl() {
  throw Error(ErrorKind::Device,
              "this encgraph was built without NCCL, which multi-process data parallelism over "
              "CUDA needs: rebuild with the CUDA toolkit's nccl.h, or run CPU ranks under mpirun");
}
}  // namespace

std::string NcclGroup::unique_id() {
  no_nccl();
}
NcclGroup::NcclGroup(const std::string&, int, int, int, double, ProcessGroup*, const std::string&) {
  no_nccl();
}
NcclGroup::~NcclGroup() = default;
void NcclGroup::gather(const void*, void*, const std::vector<size_t>&, int, void*,
                       const std::string&) {
  no_nccl();
}
std::vector<char> NcclGroup::allgather_host(const void*, size_t, const std::string&) {
  no_nccl();
}

}  // namespace encgraph
