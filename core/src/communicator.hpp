// Gather of equal-size byte blocks between the ranks of one process to one root:
// block r of the root's `recv` receives rank r's `send`; no other rank receives
// anything. One thread issues every rank's part in one call: single-process
// NCCL needs all ranks' calls inside one group (ranks calling from their own
// threads hung on two H200s at the first collective), and CPU ranks then need
// no barrier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace encgraph {

struct GatherBuffers {
  const void* send;  // bytes of this rank's block
  void* recv;        // the root's: size() * bytes; unused (may be null) on other ranks
  void* stream;      // NCCL: the rank's stream the transfer is enqueued on
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  // ranks[r] are rank r's buffers, ranks.size() == size(), 0 <= root < size().
  // Enqueued on each rank's stream for NCCL (device memory); done on return
  // between CPU ranks.
  virtual void gather(int root, const std::vector<GatherBuffers>& ranks, size_t bytes) = 0;
  // Bytes delivered into rank r's recv so far (what the gathers moved to it).
  virtual int64_t bytes_received(int rank) const = 0;
};

// Host memory, ranks as threads of this process.
std::unique_ptr<Communicator> make_in_process_communicator(int size);
// One NCCL communicator per CUDA device (ncclCommInitAll). Throws Error(Device)
// when NCCL is not built in or the devices cannot form a clique.
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& devices);

}  // namespace encgraph
