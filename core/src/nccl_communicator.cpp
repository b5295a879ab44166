#include "communicator.hpp"
#include "cuda_check.hpp"

#include <encgraph/error.hpp>

#include <dlfcn.h>
#include <nccl.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace encgraph {
namespace {

// NCCL is opened on first use rather than linked: a process that never runs
// data parallel starts on machines whose NCCL is elsewhere or missing.
struct Nccl {
  decltype(&::ncclCommInitAll) comm_init_all = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw Error(ErrorKind::Device, std::string("data parallel over CUDA needs NCCL: ") +
                                         dlerror() + " (add its folder to LD_LIBRARY_PATH)");
    Nccl n;
    n.comm_init_all = reinterpret_cast<decltype(n.comm_init_all)>(dlsym(lib, "ncclCommInitAll"));
    n.comm_destroy = reinterpret_cast<decltype(n.comm_destroy)>(dlsym(lib, "ncclCommDestroy"));
    n.send = reinterpret_cast<decltype(n.send)>(dlsym(lib, "ncclSend"));
    n.recv = reinterpret_cast<decltype(n.recv)>(dlsym(lib, "ncclRecv"));
    n.group_start = reinterpret_cast<decltype(n.group_start)>(dlsym(lib, "ncclGroupStart"));
    n.group_end = reinterpret_cast<decltype(n.group_end)>(dlsym(lib, "ncclGroupEnd"));
    n.error_string = reinterpret_cast<decltype(n.error_string)>(dlsym(lib, "ncclGetErrorString"));
    if (!n.comm_init_all || !n.comm_destroy || !n.send || !n.recv || !n.group_start ||
        !n.group_end || !n.error_string)
      throw Error(ErrorKind::Device,
                  "libnccl lacks one of ncclCommInitAll, ncclSend, ncclRecv, ncclGroupStart/End "
                  "(NCCL 2.7 or later is needed); point LD_LIBRARY_PATH at a newer NCCL");
    return n;
  }();
  return loaded;
}

#define EG_NCCL_CHECK(expr)                                                                      \
  do {                                                                                           \
    const ncclResult_t eg_nccl_status_ = (expr);                                                 \
    if (eg_nccl_status_ != ncclSuccess)                                                          \
      throw Error(ErrorKind::Device, std::string("NCCL error ") +                                \
                                         nccl().error_string(eg_nccl_status_) + " in " + #expr + \
                                         " at " + __FILE__ + ":" + std::to_string(__LINE__));    \
  } while (0)

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
