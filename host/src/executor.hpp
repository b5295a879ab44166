// Runs a workload through a Runtime in requests of `request_size` items and
// measures each execute() call. A request's latency runs from the call until
// its results are ready: copied to the host when a consumer wants them, else
// released (which waits for the device).
#pragma once

#include "workload.hpp"

#include <encgraph/runtime.hpp>

#include <functional>
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

// A request's items (workload order), the call's Result and its bytes on the host.
using ResultConsumer =
    std::function<void(const std::vector<const WorkItem*>& items, const Result& result,
                       const std::vector<uint8_t>& host_bytes)>;

struct ExecOptions {
  int64_t request_size = 16;
  int64_t warmup_requests = 0;
  std::string label = "run";
  bool progress = true;
};

// Makes a plugin item: decodes the file if there is one, else synthetic values.
Item make_item(Runtime& runtime, const WorkItem& work);

// Throws a Config error when the workload holds videos the runtime cannot run.
void check_workload_supported(const Runtime& runtime, const std::vector<WorkItem>& work);

Measurement execute_workload(Runtime& runtime, const std::vector<WorkItem>& work,
                             const ExecOptions& options, const ResultConsumer& consumer = {});

// The same workload on several runtimes, request by request: request r runs on
// every runtime before request r + 1, the runtime going first rotating. One
// Measurement per runtime, in order; the consumer sees runtimes[0]'s results.
std::vector<Measurement> execute_interleaved(const std::vector<Runtime*>& runtimes,
                                             const std::vector<WorkItem>& work,
                                             const ExecOptions& options,
                                             const ResultConsumer& consumer = {});


// a - b for the counters; rates recomputed; capture facts taken from a.
Stats stats_delta(const Stats& a, const Stats& b);

// Nearest-rank percentile (p in [0, 100]) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double p);

}  // namespace encgraph::host
