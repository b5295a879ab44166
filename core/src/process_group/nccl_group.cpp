#include "nccl_group.hpp"

#include "../cuda_check.hpp"
#include "../nccl_library.hpp"
#include "poll_deadline.hpp"

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <exception>

namespace encgraph {

struct NcclGroup::State {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  double timeout_s = 300.0;
  ProcessGroup* control = nullptr;
  bool broken = false;         // aborted: destroy must not wait on it
  cudaStream_t own = nullptr;  // for allgather_host
  void* staging = nullptr;     // device memory for allgather_host
  size_t staging_bytes = 0;

  // Polls until the communicator has no operation in progress and `stream`
  // (when given) has drained; a failure notice from another rank, an NCCL
  // error or the deadline aborts the communicator and throws.
  void wait(cudaStream_t stream, const std::string& what) {
    const PollDeadline deadline(timeout_s);
    for (;;) {
      ncclResult_t async = ncclSuccess;
      EG_NCCL_CHECK(nccl().comm_get_async_error(comm, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        abort();
        throw Error(ErrorKind::Device, "rank " + std::to_string(rank) + ": NCCL failed during " +
                                           what + ": " + nccl().error_string(async));
      }
      bool done = async == ncclSuccess;
      if (done && stream) {
        const cudaError_t q = cudaStreamQuery(stream);
        if (q != cudaErrorNotReady) EG_CUDA_CHECK(q);
        done = q == cudaSuccess;
      }
      if (done) return;
      if (control) {
        try {
          control->check_failures();
        } catch (...) {
          abort();
          throw;
        }
      }
      if (deadline.passed()) {
        abort();
        throw GroupTimeout("rank " + std::to_string(rank) + ": the NCCL transfers of " + what +
                           " did not finish within " + format_seconds(timeout_s) +
                           " (distributed.timeout_s): another rank may have died or "
                           "hung, or be far slower");
      }
      deadline.pause();
    }
  }

  void abort() noexcept {
    if (comm && !broken) {
      broken = true;
      nccl().comm_abort(comm);  // frees the communicator; work on it is cancelled
      comm = nullptr;
    }
  }
};

std::string NcclGroup::unique_id() {
  ncclUniqueId id;
  EG_NCCL_CHECK(nccl().get_unique_id(&id));
  return std::string(id.internal, sizeof id.internal);
}

NcclGroup::NcclGroup(const std::string& id, int rank, int size, int device, double timeout_s,
                     ProcessGroup* control, const std::string& what)
    : s_(std::make_unique<State>()) {
  ncclUniqueId uid;
  if (id.size() != sizeof uid.internal)
    throw Error(ErrorKind::Internal, "an NCCL id of " + std::to_string(id.size()) +
                                         " bytes reached rank " + std::to_string(rank));
  std::memcpy(uid.internal, id.data(), sizeof uid.internal);
  s_->rank = rank;
  s_->size = size;
  s_->device = device;
  s_->timeout_s = timeout_s;
  s_->control = control;
  EG_CUDA_CHECK(cudaSetDevice(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; wait() polls, so a missing rank cannot hang us
  EG_NCCL_CHECK(nccl().comm_init_rank_config(&s_->comm, size, uid, rank, &config));
  s_->wait(nullptr, what + " (NCCL setup)");
}

NcclGroup::~NcclGroup() {
  if (!s_) return;
  if (s_->staging) cudaFree(s_->staging);
  if (s_->own) cudaStreamDestroy(s_->own);
  if (s_->comm && !s_->broken && std::uncaught_exceptions() > 0) {
    // Torn down by a failure: peers may be mid-transfer with us, and
    // ncclCommDestroy would wait for them; abort returns at once.
    s_->abort();
  } else if (s_->comm && !s_->broken) {
    const ncclResult_t st = nccl().comm_destroy(s_->comm);
    if (st != ncclSuccess && st != ncclInProgress)
      spdlog::error("ncclCommDestroy: {}", nccl().error_string(st));
  }
}

void NcclGroup::gather(const void* send, void* recv, const std::vector<size_t>& bytes_per_rank,
                       int root, void* stream_ptr, const std::string& what) {
  if (!s_->comm)
    throw Error(ErrorKind::Device, "rank " + std::to_string(s_->rank) +
                                       ": the NCCL communicator was aborted after an earlier "
                                       "failure; start the job again");
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  EG_CUDA_CHECK(cudaSetDevice(s_->device));
  // The root receives every other rank's part point to point (parts differ in
  // size) and copies its own; the others send theirs.
  EG_NCCL_CHECK(nccl().group_start());
  size_t at = 0;
  for (int r = 0; r < s_->size; ++r) {
    const size_t bytes = bytes_per_rank[static_cast<size_t>(r)];
    if (bytes > 0) {
      if (s_->rank == root && r != root) {
        EG_NCCL_CHECK(
            nccl().recv(static_cast<char*>(recv) + at, bytes, ncclUint8, r, s_->comm, stream));
      } else if (s_->rank == r && r != root) {
        EG_NCCL_CHECK(nccl().send(send, bytes, ncclUint8, root, s_->comm, stream));
      }
    }
    if (s_->rank == root && r == root && bytes > 0)
      EG_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(recv) + at, send, bytes,
                                    cudaMemcpyDeviceToDevice, stream));
    at += bytes;
  }
  EG_NCCL_CHECK(nccl().group_end());
  s_->wait(stream, what);
}

std::vector<char> NcclGroup::allgather_host(const void* send, size_t bytes,
                                            const std::string& what) {
  if (!s_->comm)
    throw Error(ErrorKind::Device, "rank " + std::to_string(s_->rank) +
                                       ": the NCCL communicator was aborted after an earlier "
                                       "failure; start the job again");
  EG_CUDA_CHECK(cudaSetDevice(s_->device));
  if (!s_->own) EG_CUDA_CHECK(cudaStreamCreateWithFlags(&s_->own, cudaStreamNonBlocking));
  const size_t total = bytes * static_cast<size_t>(s_->size + 1);
  if (s_->staging_bytes < total) {
    if (s_->staging) EG_CUDA_CHECK(cudaFree(s_->staging));
    s_->staging = nullptr;
    EG_CUDA_CHECK(cudaMalloc(&s_->staging, total));
    s_->staging_bytes = total;
  }
  char* mine = static_cast<char*>(s_->staging);
  char* all = mine + bytes;
  EG_CUDA_CHECK(cudaMemcpyAsync(mine, send, bytes, cudaMemcpyHostToDevice, s_->own));
  EG_NCCL_CHECK(nccl().all_gather(mine, all, bytes, ncclUint8, s_->comm, s_->own));
  s_->wait(s_->own, what);
  std::vector<char> out(bytes * static_cast<size_t>(s_->size));
  EG_CUDA_CHECK(cudaMemcpy(out.data(), all, out.size(), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace encgraph
