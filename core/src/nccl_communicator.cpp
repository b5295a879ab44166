#include "communicator.hpp"
#include "cuda_check.hpp"
#include "nccl_library.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace encgraph {
namespace {

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const std::vector<int>& devices)
      : devices_(devices), comms_(devices.size(), nullptr), received_(devices.size(), 0) {
    EG_NCCL_CHECK(
        nccl().comm_init_all(comms_.data(), static_cast<int>(devices.size()), devices_.data()));
  }
  ~NcclCommunicator() override {
    for (ncclComm_t c : comms_)
      if (c) {
        const ncclResult_t st = nccl().comm_destroy(c);
        if (st != ncclSuccess) spdlog::error("ncclCommDestroy: {}", nccl().error_string(st));
      }
  }
  int size() const override { return static_cast<int>(comms_.size()); }
  void gather(int root, const std::vector<GatherBuffers>& ranks, size_t bytes) override {
    if (ranks.size() != comms_.size() || root < 0 || root >= size())
      throw Error(ErrorKind::Internal, "gather to rank " + std::to_string(root) + " with " +
                                           std::to_string(ranks.size()) + " ranks' buffers on " +
                                           std::to_string(comms_.size()) + " NCCL ranks");
    if (bytes == 0) return;
    const size_t to = static_cast<size_t>(root);
    char* recv = static_cast<char*>(ranks[to].recv);
    // One group: every rank sends its block to the root, the root receives each
    // into its slot; NCCL launches them together when the group closes.
    EG_NCCL_CHECK(nccl().group_start());
    for (size_t r = 0; r < ranks.size(); ++r) {
      ncclResult_t st = nccl().send(ranks[r].send, bytes, ncclUint8, root, comms_[r],
                                    static_cast<cudaStream_t>(ranks[r].stream));
      if (st == ncclSuccess)
        st = nccl().recv(recv + r * bytes, bytes, ncclUint8, static_cast<int>(r), comms_[to],
                         static_cast<cudaStream_t>(ranks[to].stream));
      if (st != ncclSuccess) {
        nccl().group_end();  // close the group before reporting
        EG_NCCL_CHECK(st);
      }
    }
    EG_NCCL_CHECK(nccl().group_end());
    received_[to] += static_cast<int64_t>(bytes * ranks.size());
  }
  int64_t bytes_received(int rank) const override {
    return received_.at(static_cast<size_t>(rank));
  }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<int64_t> received_;  // bytes each rank's recv was sent
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& devices) {
  return std::make_unique<NcclCommunicator>(devices);
}

}  // namespace encgraph
