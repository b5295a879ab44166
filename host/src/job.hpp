// The multi-process job this process belongs to, when `mpirun` or a scheduler
// (RANK/WORLD_SIZE) started it: joined once by the commands that run a
// workload (run, bench, encode). Every rank runs the same command; rank 0
// alone checks and writes outputs, prints and reports.
#pragma once

#include "config.hpp"

#include <encgraph/process_group.hpp>

#include <memory>
#include <string>

namespace encgraph::host {

// Joins the job per config.distributed (nothing when the process runs
// alone); later calls return the group already joined. Log lines of ranks
// other than 0 carry their rank.
std::shared_ptr<ProcessGroup> join_job(const HostConfig& config);
// The joined job, or null.
std::shared_ptr<ProcessGroup> current_job();
// Whether this process writes outputs and prints results: alone, or rank 0.
bool is_output_rank();

// Runs `check` on rank 0 only; its failure reaches every rank (the others
// wait for the verdict). Alone: just runs it.
void on_output_rank(const std::string& what, const std::function<void()>& check);

// How a command that failed with `message` leaves the job: a failure another
// rank announced is only reported; a timeout ends every process (a peer may
// be stuck in a collective); any other failure is announced to the others.
// Then the job is left. No effect when alone.
void leave_job_after_failure(const std::exception& failure) noexcept;
// Leaves the job after a command that succeeded (MPI_Finalize).
void leave_job() noexcept;

}  // namespace encgraph::host
