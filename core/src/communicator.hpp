// All-gather of equal-size byte blocks between the ranks of one process: block
// r of every rank's `recv` receives rank r's `send`. One thread issues every
// rank's part in one call: single-process NCCL needs all ranks' calls inside one
// group (ranks calling from their own threads hung on two H200s at the first
// collective), and CPU ranks then need no barrier.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace encgraph {

struct GatherBuffers {
  const void* send;  // bytes of this rank's block
  void* recv;        // size() * bytes
  void* stream;      // NCCL: the rank's stream the gather is enqueued on
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  // ranks[r] are rank r's buffers, ranks.size() == size(). Enqueued on each
  // rank's stream for NCCL (device memory); done on return between CPU ranks.
  virtual void all_gather(const std::vector<GatherBuffers>& ranks, size_t bytes) = 0;
};

// Host memory, ranks as threads of this process.
std::unique_ptr<Communicator> make_in_process_communicator(int size);
// One NCCL communicator per CUDA device (ncclCommInitAll). Throws Error(Device)
// when NCCL is not built in or the devices cannot form a clique.
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& devices);

}  // namespace encgraph
