// One NCCL communicator over the processes of a job, one rank per process,
// each on its own CUDA device: what moves embeddings between CUDA ranks (and
// control messages under an environment launch). Made nonblocking so that
// every wait polls a deadline and a failure notice, and a stuck communicator
// is aborted instead of hanging the process.
#pragma once

#include <encgraph/process_group.hpp>

#include <memory>
#include <string>
#include <vector>

namespace encgraph {

class NcclGroup {
 public:
  // A fresh unique id (ncclGetUniqueId), 128 bytes: rank 0 makes it.
  static std::string unique_id();

  // Joins the communicator `id` names as `rank` of `size` on CUDA device
  // `device`. `control` (may be null) is polled for failure notices while
  // waiting. Throws GroupTimeout when the ranks do not meet in timeout_s.
  NcclGroup(const std::string& id, int rank, int size, int device, double timeout_s,
            ProcessGroup* control, const std::string& what);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // Rank r's bytes_per_rank[r] bytes at `send` (device memory) land in the
  // root's `recv` (device memory) one after the other in rank order. Enqueued
  // on `stream`, then waited for (bounded by the timeout).
  void gather(const void* send, void* recv, const std::vector<size_t>& bytes_per_rank, int root,
              void* stream, const std::string& what);
  // Every rank's `bytes` of host memory, in rank order, to every rank.
  std::vector<char> allgather_host(const void* send, size_t bytes, const std::string& what);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace encgraph
