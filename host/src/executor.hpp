// Runs a workload in requests of `request_size` items on an Engine (one
// Runtime, or a DataParallelRuntime spreading each request over its ranks) and
// measures each execute() call. A request's latency runs from the call until
// the device has written every row of its result; copying the rows to the host
// for a consumer (embeddings) comes after and counts in wall_seconds only.
#pragma once

#include "image_io.hpp"
#include "workload.hpp"

#include <encgraph/data_parallel.hpp>
#include <encgraph/runtime.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace encgraph::host {

struct Measurement {
  int64_t items = 0;
  int64_t tokens = 0;  // output tokens (embedding rows) of the items
  int64_t videos = 0;
  int64_t requests = 0;
  double exec_seconds = 0.0;      // sum of request latencies
  double wall_seconds = 0.0;      // with item preparation (decoding, make_item)
                                  // of the measured requests
  std::vector<double> latencies;  // seconds, one per request
  Stats stats;                    // the measured requests only (warm-up excluded)
};

// A request ready to execute: its plugin items, made outside the timed call
// (for data parallel, on the ranks that run them).
struct PreparedRequest {
  std::vector<Item> items;    // one Runtime
  DataParallelRequest ranks;  // data parallel: items made on the ranks that run them
};

// What a workload's requests run on: one Runtime, or a DataParallelRuntime
// whose ranks each take a share of every request. Either way a request gives
// one Result holding its items' rows in the request's order.
class Engine {
 public:
  explicit Engine(std::unique_ptr<Runtime> runtime);
  explicit Engine(std::unique_ptr<DataParallelRuntime> ranks);

  bool data_parallel() const { return ranks_ != nullptr; }
  int world_size() const { return ranks_ ? ranks_->world_size() : 1; }
  // The only runtime, or rank 0: plugin, plan and model facts (every rank has
  // the same) and where a data-parallel Result lives.
  const Runtime& front() const { return *front_; }
  // Each rank's device name ("cpu", "cuda:1 (NVIDIA H200)"); one entry when
  // not data parallel.
  std::vector<std::string> device_names() const;

  void capture();
  // Counters summed over the ranks (graphs and graph memory too: each rank
  // holds its own); capture time summed, the ranks capturing one at a time.
  Stats stats() const;
  // Decodes files (images, video frames) and, for one Runtime, makes the
  // plugin items: the part of a request that is not timed.
  PreparedRequest prepare(const std::vector<const WorkItem*>& work);
  Result execute(const PreparedRequest& request);

 private:
  std::unique_ptr<Runtime> single_;
  std::unique_ptr<DataParallelRuntime> ranks_;
  Runtime* front_ = nullptr;
};

// A request's items (workload order), the call's Result and its bytes on the
// host (Result::to_host(), item i at host_offset(i)).
using ResultConsumer =
    std::function<void(const std::vector<const WorkItem*>& items, const Result& result,
                       const std::vector<uint8_t>& host_bytes)>;

struct ExecOptions {
  int64_t request_size = 16;
  int64_t warmup_requests = 0;
  std::string label = "run";
  bool progress = true;
};

// Makes a plugin item: decodes its image file or a video's frame files if it
// has them, else synthetic values.
Item make_item(Runtime& runtime, const WorkItem& work);

// Throws a Config error when the workload holds videos the runtime cannot run.
void check_workload_supported(const Runtime& runtime, const std::vector<WorkItem>& work);

Measurement execute_workload(Engine& engine, const std::vector<WorkItem>& work,
                             const ExecOptions& options, const ResultConsumer& consumer = {});

// The same workload on several engines, request by request: request r runs on
// every engine before request r + 1, the engine going first rotating. One
// Measurement per engine, in order; the consumer sees engines[0]'s results.
std::vector<Measurement> execute_interleaved(const std::vector<Engine*>& engines,
                                             const std::vector<WorkItem>& work,
                                             const ExecOptions& options,
                                             const ResultConsumer& consumer = {});

// a - b for the counters; rates recomputed; capture facts taken from a.
Stats stats_delta(const Stats& a, const Stats& b);

// Every counter summed (graphs, graph memory and capture time too); rates
// recomputed; the budgets taken from the first.
Stats sum_stats(const std::vector<Stats>& ranks);

// Nearest-rank percentile (p in [0, 100]) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double p);

}  // namespace encgraph::host
