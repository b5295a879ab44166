// Runs a workload in requests of `request_size` items on an encgraph::Engine
// (one Runtime, or a DataParallelRuntime spreading each request over its
// ranks) and measures each execute() call. A request's latency runs from the
// call until the device has written every row of its result; copying the rows
// to the host for a consumer (embeddings) comes after and counts in
// wall_seconds only.
#pragma once

#include "image_io.hpp"
#include "workload.hpp"

#include <encgraph/engine.hpp>
#include <encgraph/runtime.hpp>

#include <functional>
#include <string>
#include <vector>

namespace encgraph::host {

struct Measurement {
  int64_t items = 0;
  int64_t tokens = 0;  // output tokens (rows of the first output) of the items
  int64_t videos = 0;
  int64_t requests = 0;
  double exec_seconds = 0.0;      // sum of request latencies
  double wall_seconds = 0.0;      // with item preparation (decoding, make_item)
                                  // of the measured requests
  std::vector<double> latencies;  // seconds, one per request
  Stats stats;                    // the measured requests only (warm-up excluded)
};

// Each rank's device name ("cpu", "cuda:1 (NVIDIA H200)"); one entry for a
// single Runtime.
std::vector<std::string> rank_device_names(Engine& engine);

// Decodes a request's files (images, video frames) and makes its plugin items
// on the ranks that run them: the part of a request that is not timed. Items
// are made one at a time per rank, so that only one item's decoded pixels per
// rank are held at once; a process decodes only the files of its own items.
Request prepare_request(Engine& engine, const std::vector<const WorkItem*>& work);

// A request's items (workload order) and the call's Result (item i of the
// request is result.item(i, o)); called after the request's latency is taken.
using ResultConsumer =
    std::function<void(const std::vector<const WorkItem*>& items, const Result& result)>;

struct ExecOptions {
  int64_t request_size = 16;
  int64_t warmup_requests = 0;
  std::string label = "run";
  bool progress = true;
};

// Makes a plugin item: decodes its image file or a video's frame files if it
// has them, else synthetic values.
Item make_item(Model& model, const WorkItem& work);

// Makes a request's items on `runtime` as Runtime::make_items does (on its
// item threads when the plugin allows it), decoding every file first.
std::vector<Item> make_items(Runtime& runtime, const std::vector<const WorkItem*>& work);

// Throws a Config error when the workload holds videos the runtime cannot run.
void check_workload_supported(const Model& model, const std::vector<WorkItem>& work);

Measurement execute_workload(Engine& engine, const std::vector<WorkItem>& work,
                             const ExecOptions& options, const ResultConsumer& consumer = {});

// The same workload on several engines, request by request: request r runs on
// every engine before request r + 1, the engine going first rotating. One
// Measurement per engine, in order; consumers[k] (when given) sees engine k's
// results of the measured requests.
std::vector<Measurement> execute_interleaved(const std::vector<Engine*>& engines,
                                             const std::vector<WorkItem>& work,
                                             const ExecOptions& options,
                                             const std::vector<ResultConsumer>& consumers = {});

// a - b for the counters, per path too; rates recomputed; capture facts
// (graphs, budgets, capture time, graph memory) taken from a.
Stats stats_delta(const Stats& a, const Stats& b);

// Nearest-rank percentile (p in [0, 100]) of unsorted values; 0 when empty.
double percentile(std::vector<double> values, double p);

}  // namespace encgraph::host
