// Data parallelism over several devices of one process: items are balanced over
// ranks by input size (largest first onto the least-loaded rank), each rank runs
// its share through its own Runtime (same packing, graphs and eager fallback),
// outputs are padded to the largest rank's row count, all-gathered (NCCL between
// GPUs, an in-process exchange between CPU ranks), unpadded and returned in the
// caller's order.
#pragma once

#include <encgraph/load_balance.hpp>
#include <encgraph/runtime.hpp>

#include <memory>
#include <string>
#include <vector>

namespace encgraph {

class Communicator;

class DataParallelRuntime {
 public:
  // One rank per entry of `devices` ("cpu" or "cuda:N"; all CPU or all CUDA).
  DataParallelRuntime(const RuntimeConfig& config, const std::vector<std::string>& devices);
  ~DataParallelRuntime();
  DataParallelRuntime(const DataParallelRuntime&) = delete;
  DataParallelRuntime& operator=(const DataParallelRuntime&) = delete;

  int world_size() const { return static_cast<int>(ranks_.size()); }
  Runtime& rank(int r) { return *ranks_.at(r); }

  void capture();
  // Every rank makes every item (as every rank of the reference holds all
  // inputs), runs its share, and the gathered rows land on rank 0's device.
  Result execute(const std::vector<eg_item_desc>& items);
  // The assignment of the last execute() call.
  const RankAssignment& last_assignment() const { return assignment_; }

 private:
  std::vector<std::unique_ptr<Runtime>> ranks_;
  std::unique_ptr<Communicator> comm_;
  RankAssignment assignment_;
};

}  // namespace encgraph
