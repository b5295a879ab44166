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

// A request made ready for DataParallelRuntime::execute: each item made on the
// rank that runs it, and the assignment. Making items runs the plugin's
// preprocessing, so a caller timing execution can prepare first.
struct DataParallelRequest {
  std::vector<std::vector<Item>> rank_items;  // rank r's items, in assignment order
  RankAssignment assignment;
  std::vector<int64_t> tokens;  // output rows of each item, in the caller's order
};

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
  // Rank 0 makes every item (its spec sizes the assignment), the other ranks
  // the items they run. The descriptions' pixels need only live through this.
  // labels[i], when given, names item i in errors (else "item i").
  DataParallelRequest prepare(const std::vector<eg_item_desc>& items,
                              const std::vector<std::string>& labels = {});
  // Each rank runs its share; the rows are gathered onto rank 0's device and
  // returned in the caller's order.
  Result execute(const DataParallelRequest& request);
  // prepare() then execute().
  Result execute(const std::vector<eg_item_desc>& items);
  // The assignment of the last execute() call.
  const RankAssignment& last_assignment() const { return assignment_; }

 private:
  std::vector<std::unique_ptr<Runtime>> ranks_;
  std::unique_ptr<Communicator> comm_;
  RankAssignment assignment_;
};

}  // namespace encgraph
