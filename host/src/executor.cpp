#include "executor.hpp"

#include "image_io.hpp"
#include "progress.hpp"

#include <encgraph/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace encgraph::host {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

Item make_item(Runtime& runtime, const WorkItem& w) {
  eg_item_desc desc{};
  desc.modality = w.modality;
  desc.channels = 3;
  desc.height = w.height;
  desc.width = w.width;
  desc.frames = w.frames;
  desc.seed = w.seed;
  if (w.file.empty()) return runtime.make_item(desc);
  const DecodedImage img = decode_image(w.file);
  desc.height = img.height;
  desc.width = img.width;
  desc.channels = img.channels;
  desc.pixels = img.pixels.data();
  try {
    return runtime.make_item(desc);
  } catch (const Error& e) {
    throw Error(e.kind(), "image '" + w.file + "': " + e.what());
  }
}

void check_workload_supported(const Runtime& runtime, const std::vector<WorkItem>& work) {
  const auto videos = std::count_if(
      work.begin(), work.end(), [](const WorkItem& w) { return w.modality == EG_MODALITY_VIDEO; });
  if (videos == 0) return;
  if (!runtime.supports_modality(EG_MODALITY_VIDEO))
    throw_config("the workload holds " + std::to_string(videos) + " video items but plugin '" +
                 runtime.plugin_name() +
                 "' takes images only; set workload.video_fraction = 0 "
                 "or remove the videos from the trace");
  if (runtime.plan().max_frames_per_batch == 0)
    throw_config("the workload holds " + std::to_string(videos) +
                 " video items but the plan "
                 "allows no frames (budgets.video = false or budgets.max_frames_per_batch = 0)");
}

Stats stats_delta(const Stats& a, const Stats& b) {
  Stats d = a;
  d.graph_hits -= b.graph_hits;
  d.graph_misses -= b.graph_misses;
  d.real_tokens -= b.real_tokens;
  d.budget_tokens -= b.budget_tokens;
  d.batches_graph -= b.batches_graph;
  d.batches_eager -= b.batches_eager;
  d.batches_eager_chosen -= b.batches_eager_chosen;
  const int64_t total = d.graph_hits + d.graph_misses;
  d.hit_rate = total > 0 ? static_cast<double>(d.graph_hits) / static_cast<double>(total) : 0.0;
  d.padded_token_efficiency = d.budget_tokens > 0 ? static_cast<double>(d.real_tokens) /
                                                        static_cast<double>(d.budget_tokens)
                                                  : 0.0;
  return d;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t index =
      static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[index];
}

namespace {

// Runs request r of the workload (items [r * size, (r + 1) * size)) and, when
// measured, adds its latency and items to m.
void run_request(Runtime& runtime, const std::vector<WorkItem>& work, size_t request_size,
                 size_t r, bool measured, Measurement& m, const ResultConsumer& consumer) {
  const auto prepared = Clock::now();
  const size_t first = r * request_size, last = std::min(work.size(), first + request_size);
  std::vector<Item> items;
  std::vector<const WorkItem*> described;
  items.reserve(last - first);
  for (size_t i = first; i < last; ++i) {
    items.push_back(make_item(runtime, work[i]));
    described.push_back(&work[i]);
  }
  const auto start = Clock::now();
  double latency = 0.0;
  {
    Result result = runtime.execute(items);
    result.wait();  // latency ends when the device has written every row
    latency = since(start);
    if (consumer && measured) consumer(described, result, result.to_host());
  }
  if (!measured) return;
  m.wall_seconds += since(prepared);
  m.latencies.push_back(latency);
  m.requests += 1;
  m.exec_seconds += latency;
  for (size_t i = 0; i < items.size(); ++i) {
    m.items += 1;
    m.tokens += items[i].spec().output_tokens;
    m.videos += described[i]->modality == EG_MODALITY_VIDEO;
  }
}

}  // namespace

std::vector<Measurement> execute_interleaved(const std::vector<Runtime*>& runtimes,
                                             const std::vector<WorkItem>& work,
                                             const ExecOptions& options,
                                             const ResultConsumer& consumer) {
  for (Runtime* runtime : runtimes) check_workload_supported(*runtime, work);
  const size_t request_size = static_cast<size_t>(std::max<int64_t>(options.request_size, 1));
  const size_t num_requests = (work.size() + request_size - 1) / request_size;
  const size_t n = runtimes.size();

  Measurement warm;
  for (Runtime* runtime : runtimes)
    for (size_t r = 0;
         r < std::min<size_t>(num_requests, static_cast<size_t>(options.warmup_requests)); ++r)
      run_request(*runtime, work, request_size, r, false, warm, {});

  std::vector<Measurement> m(n);
  std::vector<Stats> before;
  for (Runtime* runtime : runtimes) before.push_back(runtime->stats());
  Progress progress(options.label, static_cast<int64_t>(work.size()));
  for (size_t r = 0; r < num_requests; ++r) {
    // Each request runs on every runtime, the one going first rotating, so that
    // none always meets the GPU warmer (clocks drift under seconds of load).
    for (size_t k = 0; k < n; ++k) {
      const size_t which = (r + k) % n;
      run_request(*runtimes[which], work, request_size, r, true, m[which],
                  which == 0 ? consumer : ResultConsumer{});
    }
    if (options.progress) progress.update(m[0].items);
  }
  progress.finish();
  for (size_t k = 0; k < n; ++k) m[k].stats = stats_delta(runtimes[k]->stats(), before[k]);
  return m;
}

Measurement execute_workload(Runtime& runtime, const std::vector<WorkItem>& work,
                             const ExecOptions& options, const ResultConsumer& consumer) {
  return execute_interleaved({&runtime}, work, options, consumer).front();
}

}  // namespace encgraph::host
