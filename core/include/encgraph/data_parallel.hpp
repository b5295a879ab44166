// Data parallelism over several devices of one process: items are balanced over
// ranks by input size (largest first onto the least-loaded rank), each rank runs
// its share through its own Runtime (same packing, graphs and eager fallback),
// and every output's rows are gathered to the rank that asked, rank 0 (NCCL
// send/receive between GPUs, an in-process copy between CPU ranks; no other
// rank receives anything), unpadded and returned in the caller's order.
#pragma once

#include <encgraph/engine.hpp>
#include <encgraph/load_balance.hpp>
#include <encgraph/runtime.hpp>

#include <memory>
#include <string>
#include <vector>

namespace encgraph {

class Communicator;

// The request type of Engine, under its former name.
using DataParallelRequest = Request;

class DataParallelRuntime : public Engine {
 public:
  // One rank per entry of `devices` ("cpu" or "cuda:N"; all CPU or all CUDA).
  DataParallelRuntime(const RuntimeConfig& config, const std::vector<std::string>& devices);
  ~DataParallelRuntime() override;
  DataParallelRuntime(const DataParallelRuntime&) = delete;
  DataParallelRuntime& operator=(const DataParallelRuntime&) = delete;

  int world_size() const override { return static_cast<int>(ranks_.size()); }
  Runtime& rank(int r) { return *ranks_.at(r); }
  const Model& model() const override { return *ranks_.front(); }
  Model& model() override { return *ranks_.front(); }

  void capture() override;
  bool is_captured() const override;
  // Rank 0 makes every item (its spec sizes the assignment), the other ranks
  // the items they run. The descriptions' pixels need only live through this.
  // labels[i], when given, names item i in errors (else "item i").
  Request prepare(const std::vector<eg_item_desc>& items,
                  const std::vector<std::string>& labels = {}) override;
  // Items assigned from their geometry, each loaded and made by the rank that
  // runs it, the ranks in parallel.
  Request prepare_lazy(const std::vector<eg_item_desc>& items,
                       const std::vector<std::string>& labels, const PixelLoader& load) override;
  std::vector<std::string> device_names() const override;
  // Each rank runs its share; every output's rows are gathered onto rank 0's
  // device and returned in the caller's order.
  Result execute(const Request& request, ExecuteMode mode = ExecuteMode::Planned) override;
  // prepare() then execute().
  Result execute(const std::vector<eg_item_desc>& items);
  // Every rank's statistics, summed (encgraph::accumulate).
  Stats stats() const override;
  void synchronize() override;

  // The assignment of the last execute() call.
  const RankAssignment& last_assignment() const { return assignment_; }
  // Bytes the gathers have delivered into rank r's memory since construction
  // (rank 0 receives every rank's rows; the others nothing).
  int64_t bytes_received(int rank) const;

 private:
  std::vector<std::unique_ptr<Runtime>> ranks_;
  std::unique_ptr<Communicator> comm_;
  RankAssignment assignment_;
};

}  // namespace encgraph
