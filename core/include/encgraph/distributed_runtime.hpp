// One rank of a multi-process data-parallel job (`mpirun -np N encgraph ...`,
// or processes a scheduler started with RANK/WORLD_SIZE): every process runs
// the same program on its own device. Items are assigned to ranks from their
// geometry alone, identically on every rank (largest input first onto the
// least-loaded rank), so each rank decodes and runs only its own items; the
// rows are gathered to rank 0 (NCCL between CUDA ranks, MPI between CPU
// ranks), which alone gets them back from execute().
//
// Every call is collective: each rank must make the same calls in the same
// order (construction, capture, prepare, execute, stats). A rank that fails
// makes the others fail naming it (ProcessGroup).
#pragma once

#include <encgraph/engine.hpp>
#include <encgraph/load_balance.hpp>
#include <encgraph/process_group.hpp>
#include <encgraph/runtime.hpp>

#include <memory>
#include <string>
#include <vector>

namespace encgraph {

class NcclGroup;

// The device of a rank: "cuda:{local_rank}", "cuda" and "auto" (with a GPU)
// give CUDA device local_rank; "cuda:N" and "cpu" are taken as they are.
// Throws Error(Config) when the host has no CUDA device for this local rank.
std::string rank_device(const std::string& device, int local_rank, int cuda_devices);
// rank_device with the CUDA devices this process sees.
std::string rank_device(const std::string& device, int local_rank);
// Checks, before any message is sent, that this rank's device suits its
// launch (CPU ranks need mpirun) and tells the group the CUDA device its
// control messages use. Throws Error(Config) with the fix.
void prepare_rank_device(ProcessGroup& group, const std::string& device);

class DistributedRuntime : public Engine {
 public:
  DistributedRuntime(const RuntimeConfig& config, std::shared_ptr<ProcessGroup> group);
  ~DistributedRuntime() override;
  DistributedRuntime(const DistributedRuntime&) = delete;
  DistributedRuntime& operator=(const DistributedRuntime&) = delete;

  void capture() override;
  bool is_captured() const override;
  // The descriptions' pixels are needed only for this rank's items.
  Request prepare(const std::vector<eg_item_desc>& items,
                  const std::vector<std::string>& labels = {}) override;
  Request prepare_lazy(const std::vector<eg_item_desc>& items,
                       const std::vector<std::string>& labels, const PixelLoader& load) override;
  // Runs this rank's items and gathers every rank's rows to rank 0: its
  // result holds every item in the caller's order; other ranks get none.
  Result execute(const Request& request, ExecuteMode mode = ExecuteMode::Planned) override;
  // Every rank's statistics, summed (collective).
  Stats stats() const override;
  int world_size() const override;
  const Model& model() const override { return *local_; }
  Model& model() override { return *local_; }
  void synchronize() override;
  int process_rank() const override;
  std::vector<std::string> device_names() const override { return device_names_; }

  ProcessGroup& group() const { return *group_; }
  // The assignment of the last execute() call.
  const RankAssignment& last_assignment() const { return assignment_; }

 private:
  std::shared_ptr<ProcessGroup> group_;
  std::unique_ptr<Runtime> local_;
  std::unique_ptr<NcclGroup> nccl_;  // CUDA ranks: moves the rows
  std::vector<std::string> device_names_;
  RankAssignment assignment_;
  int64_t requests_ = 0;  // names steps in errors and timeouts
};

}  // namespace encgraph
