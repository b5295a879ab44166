// The rendezvous of an environment launch: rank 0 publishes its NCCL unique id
// in a file on a filesystem every rank sees; the other ranks wait for it. The
// file names the job and the world size, so that a file an earlier job left is
// not mistaken for this job's.
#pragma once

#include <functional>
#include <string>

namespace encgraph {

// Writes the id atomically (a temporary file in the same folder, then a
// rename): a reader never sees half a file. Throws Error(Config) naming the
// file and the key when it cannot be written.
void publish_id_file(const std::string& path, const std::string& job_id, int world_size,
                     const std::string& id);

// Waits up to timeout_s for a file of this job and world size and returns
// its id. Without a job id, a file older than `not_before` (seconds since the
// epoch; this process's start less a margin) is taken as stale. Throws
// GroupTimeout naming the file, what it held instead, and the key.
// `poll` runs at every check (it may throw: rank 0 announced a failure).
std::string wait_id_file(const std::string& path, const std::string& job_id, int world_size,
                         double timeout_s, int rank, double not_before,
                         const std::function<void()>& poll = {});

// Removes the file if it still holds `id` (rank 0, when the job ends).
void remove_id_file(const std::string& path, const std::string& id) noexcept;

}  // namespace encgraph
