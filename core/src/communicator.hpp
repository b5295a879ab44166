// All-gather of equal-size byte blocks between the ranks of one process: block
// r of `recv` receives rank r's `send`. Each rank calls from its own thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace encgraph {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  // Enqueued on `stream` for NCCL (device memory); synchronous between CPU ranks.
  virtual void all_gather(int rank, const void* send, void* recv, size_t bytes, void* stream) = 0;
};

// Host memory, ranks as threads of this process.
std::unique_ptr<Communicator> make_in_process_communicator(int size);
// One NCCL communicator per CUDA device (ncclCommInitAll). Throws Error(Device)
// when NCCL is not built in or the devices cannot form a clique.
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& devices);

}  // namespace encgraph
