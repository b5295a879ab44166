// The processes of one data-parallel job, one rank each, as a launcher started
// them: `mpirun -np N` (Open MPI connects them; MPI carries control messages
// and, between CPU ranks, rows), or a scheduler that sets RANK, WORLD_SIZE and
// LOCAL_RANK (NCCL carries everything; rank 0 hands out its NCCL id through a
// file on a shared filesystem). Every wait is bounded by timeout_s, and a rank
// that fails tells the others, who then fail naming it (docs/distributed.md).
#pragma once

#include <encgraph/error.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace encgraph {

struct DistributedConfig {
  // "auto": mpirun's variables, else RANK/WORLD_SIZE, else one process;
  // "mpi", "env": require that launch; "off": one process whatever is set.
  std::string launch = "auto";
  // Environment launch: the file rank 0 writes its NCCL id to, on a filesystem
  // every rank sees (distributed.id_file).
  std::string id_file;
  // Environment launch: ties the id file to this job, so that a file left by
  // an earlier job is not read (default: ENCGRAPH_JOB_ID, SLURM_JOB_ID or
  // TORCHELASTIC_RUN_ID, whichever is set).
  std::string job_id;
  // The longest any rank waits for another (distributed.timeout_s).
  double timeout_s = 300.0;
};

// Messages of exchange() are at most this many bytes (longer ones are cut).
inline constexpr size_t kMaxControlBytes = 16384;

// Another rank failed and said so: its rank and message are in what(), and
// the kind is its error's (so every rank exits with the same code).
class PeerFailure : public Error {
 public:
  PeerFailure(int rank, ErrorKind kind, const std::string& message)
      : Error(kind, message), rank_(rank) {}
  int rank() const noexcept { return rank_; }

 private:
  int rank_;
};

// A rank did not answer within the timeout: only ending the whole job is safe
// (abort_job), since it may be blocked inside a collective.
class GroupTimeout : public Error {
 public:
  explicit GroupTimeout(const std::string& message) : Error(ErrorKind::Device, message) {}
};

// A failure notice on the wire: the error kind as one digit, then the message.
inline std::string encode_failure(ErrorKind kind, const std::string& message) {
  return std::string(1, static_cast<char>('0' + static_cast<int>(kind))) + message;
}
inline PeerFailure decode_failure(int rank, const std::string& notice) {
  ErrorKind kind = ErrorKind::Internal;
  std::string message = notice;
  if (!notice.empty() && notice[0] >= '0' &&
      notice[0] <= '0' + static_cast<int>(ErrorKind::Internal)) {
    kind = static_cast<ErrorKind>(notice[0] - '0');
    message = notice.substr(1);
  }
  return PeerFailure(rank, kind, "rank " + std::to_string(rank) + " failed: " + message);
}

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank among the processes of this host: picks the GPU.
  virtual int local_rank() const = 0;
  // "mpirun" or "environment".
  virtual std::string launcher() const = 0;
  virtual double timeout_s() const = 0;

  // Every rank's message, in rank order. `what` names the step in errors. A
  // failure notice from another rank throws Error naming that rank and its
  // error; a rank that does not answer in time throws a timeout naming it
  // (where the launch can tell which).
  virtual std::vector<std::string> exchange(const std::string& mine, const std::string& what) = 0;
  // Whether gather_host works (MPI: yes; environment launch: no, CPU ranks
  // need mpirun).
  virtual bool has_host_gather() const = 0;
  // Host bytes to `root`: rank r sends bytes_per_rank[r]; the root's recv holds
  // them one after the other in rank order. Bounded by the timeout.
  virtual void gather_host(const void* send, void* recv, const std::vector<size_t>& bytes_per_rank,
                           int root, const std::string& what) = 0;
  // Tells every other rank that this one failed with `message`; they throw it
  // (as a PeerFailure of `kind`) at their next wait. Never throws.
  virtual void announce_failure(ErrorKind kind, const std::string& message) noexcept = 0;
  // Throws a failure notice another rank sent, if any (polled during waits on
  // other channels, such as NCCL transfers).
  virtual void check_failures() = 0;
  // Ends every process of the job now: a rank did not answer, so no orderly
  // exit is possible. Never returns.
  [[noreturn]] virtual void abort_job(int exit_code) noexcept = 0;
  // The NCCL unique id (128 bytes) of a new communicator over all ranks:
  // made on rank 0 by `make`, handed to every rank.
  virtual std::string share_nccl_id(const std::function<std::string()>& make,
                                    const std::string& what) = 0;
  // Leaves the job after the command (MPI_Finalize), bounded by the timeout
  // so that a stuck peer cannot hold this process: past it, the process ends
  // with `exit_code` (the command's). Never throws.
  virtual void finish(int exit_code) noexcept = 0;
  // For environment launch, whose control messages travel over NCCL: the CUDA
  // device this rank uses. No effect under mpirun.
  virtual void set_device(int /*cuda_index*/) {}
};

// The launch that started this process, per `config.launch` (see there):
// "mpirun", "environment" or "" (one process).
std::string detect_launch(const DistributedConfig& config);

// Joins the job this process was launched into: nullptr when it runs alone
// (no launcher, or a world of one). Throws Error(Config) naming the variable
// or key at fault, Error(Device) when MPI or NCCL cannot be loaded or the
// ranks do not meet within the timeout. Call once per process.
std::shared_ptr<ProcessGroup> join_process_group(const DistributedConfig& config);

}  // namespace encgraph
