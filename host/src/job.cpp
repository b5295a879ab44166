#include "job.hpp"

#include <encgraph/distributed_runtime.hpp>

#include <spdlog/spdlog.h>

namespace encgraph::host {
namespace {

std::shared_ptr<ProcessGroup>& job() {
  static std::shared_ptr<ProcessGroup> group;
  return group;
}

}  // namespace

std::shared_ptr<ProcessGroup> join_job(const HostConfig& config) {
  if (job()) return job();
  job() = join_process_group(config.distributed);
  if (job()) {
    prepare_rank_device(*job(), config.runtime.device);  // before the first message
    // Every rank reached here: from now on a failure anywhere reaches all of
    // them (a launch from RANK/WORLD_SIZE connects at this first message).
    job()->exchange("joined", "joining the job");
    const std::string prefix = "[rank " + std::to_string(job()->rank()) + "] ";
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] " + prefix + "%v");
    // The other ranks' progress and info lines repeat rank 0's: warnings only.
    if (job()->rank() != 0 && spdlog::get_level() < spdlog::level::warn)
      spdlog::set_level(spdlog::level::warn);
    if (job()->rank() == 0)
      spdlog::info("joined a job of {} processes started by {}", job()->size(), job()->launcher());
  }
  return job();
}

std::shared_ptr<ProcessGroup> current_job() {
  return job();
}

bool is_output_rank() {
  return !job() || job()->rank() == 0;
}

void on_output_rank(const std::string& what, const std::function<void()>& check) {
  if (!job()) return check();
  if (job()->rank() == 0) check();
  // Rank 0 reached this point: the check passed (a failure is announced by
  // the caller's error path and thrown at the others' wait below).
  job()->exchange("ok", what);
}

void leave_job_after_failure(const std::exception& failure) noexcept {
  const std::shared_ptr<ProcessGroup> group = job();
  if (!group) return;
  if (dynamic_cast<const GroupTimeout*>(&failure)) group->abort_job(1);
  const auto* error = dynamic_cast<const Error*>(&failure);
  if (!dynamic_cast<const PeerFailure*>(&failure))
    group->announce_failure(error ? error->kind() : ErrorKind::Internal, failure.what());
  const bool usage =
      error && (error->kind() == ErrorKind::Config || error->kind() == ErrorKind::Input);
  group->finish(usage ? 2 : 1);  // the exit code the command returns (dispatch.cpp)
}

void leave_job() noexcept {
  if (const std::shared_ptr<ProcessGroup> group = job()) group->finish(0);
}

}  // namespace encgraph::host
