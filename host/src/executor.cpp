#include "executor.hpp"

#include "image_io.hpp"
#include "progress.hpp"
#include "video_file.hpp"
#include "video_frames.hpp"

#include <encgraph/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace encgraph::host {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A work item's geometry and seed; decoded pixels are the caller's to attach.
eg_item_desc describe(const WorkItem& w) {
  eg_item_desc desc{};
  desc.modality = w.modality;
  desc.channels = 3;
  desc.height = w.height;
  desc.width = w.width;
  desc.frames = w.frames;
  desc.seed = w.seed;
  return desc;
}

// Whether the item's values come from files (an image, or a video's frames)
// rather than from its seed.
bool has_files(const WorkItem& w) {
  return !w.file.empty() || !w.frame_files.empty() || !w.video_file.empty();
}

// The item's pixels: its image file, or its frame files one after the other.
// The size probed when the workload was read (and checked against the limits
// then) must still be the files' size, so no further bound is needed here.
DecodedImage decode_files(const WorkItem& w) {
  const ImageInfo expected{w.height, w.width, 0};
  constexpr int64_t kProbed = std::numeric_limits<int64_t>::max();
  if (!w.video_file.empty()) return decode_video_frames(w.video_file, w.frame_indices, expected);
  return w.file.empty() ? decode_frames(w.frame_files, kProbed, &expected)
                        : decode_image(w.file, kProbed, &expected);
}

// What a plugin error about a file item names: "image 'a.png'", or "video
// 'clip' (4 frames, 'clip/0001.png' ...)".
std::string source_of(const WorkItem& w) {
  if (!w.video_file.empty())
    return "video '" + w.video_file + "' (" + std::to_string(w.frames) + " frames sampled of " +
           std::to_string(w.video_total_frames) + ")";
  if (w.frame_files.empty()) return "image '" + w.file + "'";
  return "video '" + w.id + "' (" + std::to_string(w.frame_files.size()) + " frames, '" +
         w.frame_files.front() + "' ...)";
}

// Points `desc` at decoded pixels (which must outlive it): one image, or a
// video's frames in eg_item_desc's frames x height x width x channels layout.
void attach_pixels(eg_item_desc& desc, const DecodedImage& img) {
  desc.height = img.height;
  desc.width = img.width;
  desc.frames = img.frames;
  desc.channels = img.channels;
  desc.pixels = img.pixels.data();
}

void recompute_rates(Stats& s) {
  const int64_t total = s.graph_hits + s.graph_misses;
  s.hit_rate = total > 0 ? static_cast<double>(s.graph_hits) / static_cast<double>(total) : 0.0;
  s.padded_token_efficiency = s.budget_tokens > 0 ? static_cast<double>(s.real_tokens) /
                                                        static_cast<double>(s.budget_tokens)
                                                  : 0.0;
}

}  // namespace

std::vector<std::string> rank_device_names(Engine& engine) {
  return engine.device_names();
}

namespace {

// What a request's items are made from: their geometry, the labels errors
// name them by, and a loader decoding item i's files into its desc (the
// pixels live as long as the pointer it returns).
struct LazyWork {
  std::vector<eg_item_desc> descs;
  std::vector<std::string> labels;
  PixelLoader load;
};

LazyWork lazy_work(const std::vector<const WorkItem*>& work) {
  LazyWork lazy;
  for (const WorkItem* w : work) {
    lazy.descs.push_back(describe(*w));
    lazy.labels.push_back(has_files(*w) ? source_of(*w) : "item '" + w->id + "'");
  }
  lazy.load = [&work](size_t i, eg_item_desc& desc) -> std::shared_ptr<const void> {
    if (!has_files(*work[i])) return nullptr;
    auto pixels = std::make_shared<DecodedImage>(decode_files(*work[i]));
    attach_pixels(desc, *pixels);
    return pixels;
  };
  return lazy;
}

}  // namespace

Request prepare_request(Engine& engine, const std::vector<const WorkItem*>& work) {
  // Each item's files are decoded on the thread that makes it (the item
  // threads) and held only until it is made. With several ranks, items are
  // assigned from their geometry and each rank decodes only the files of the
  // items it makes (a rank of a multi-process job: only its own).
  const LazyWork lazy = lazy_work(work);
  return engine.prepare_lazy(lazy.descs, lazy.labels, lazy.load);
}

Item make_item(Model& model, const WorkItem& w) {
  eg_item_desc desc = describe(w);
  if (!has_files(w)) return model.make_item(desc);
  const DecodedImage pixels = decode_files(w);  // lives until the plugin has made the item
  attach_pixels(desc, pixels);
  try {
    return model.make_item(desc);
  } catch (const Error& e) {
    throw Error(e.kind(), source_of(w) + ": " + e.what());
  }
}

std::vector<Item> make_items(Runtime& runtime, const std::vector<const WorkItem*>& work) {
  const LazyWork lazy = lazy_work(work);
  std::vector<size_t> all(work.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return runtime.make_items(lazy.descs, all, lazy.labels, &lazy.load);
}

void check_workload_supported(const Model& model, const std::vector<WorkItem>& work) {
  const auto videos = std::count_if(
      work.begin(), work.end(), [](const WorkItem& w) { return w.modality == EG_MODALITY_VIDEO; });
  if (videos == 0) return;
  if (!model.supports_modality(EG_MODALITY_VIDEO))
    throw_config("the workload holds " + std::to_string(videos) + " video items but plugin '" +
                 model.plugin_name() +
                 "' takes images only; set workload.video_fraction = 0 "
                 "or remove the videos from the trace");
  if (model.plan().max_frames_per_batch == 0)
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
  d.batches_mixed -= b.batches_mixed;
  d.batches_eager_chosen -= b.batches_eager_chosen;
  // Paths match by position (every runtime of one plugin has the same list).
  for (size_t p = 0; p < d.paths.size() && p < b.paths.size(); ++p) {
    PathStats& dp = d.paths[p];
    const PathStats& bp = b.paths[p];
    dp.batches_graph -= bp.batches_graph;
    dp.batches_eager -= bp.batches_eager;
    for (int r = 0; r < kNumEagerReasons; ++r) dp.eager_by_reason[r] -= bp.eager_by_reason[r];
    dp.real_tokens -= bp.real_tokens;
    dp.budget_tokens -= bp.budget_tokens;
  }
  recompute_rates(d);
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
void run_request(Engine& engine, const std::vector<WorkItem>& work, size_t request_size, size_t r,
                 bool measured, Measurement& m, const ResultConsumer& consumer) {
  const auto prepared = Clock::now();
  const size_t first = r * request_size, last = std::min(work.size(), first + request_size);
  std::vector<const WorkItem*> described;
  for (size_t i = first; i < last; ++i) described.push_back(&work[i]);
  const Request request = prepare_request(engine, described);
  const auto start = Clock::now();
  double latency = 0.0;
  int64_t tokens = 0;
  {
    Result result = engine.execute(request);
    result.wait();  // latency ends when the device has written every row
    latency = since(start);
    for (size_t i = 0; i < result.size(); ++i) tokens += result.rows(i);
    if (consumer && measured) consumer(described, result);
  }
  if (!measured) return;
  m.wall_seconds += since(prepared);
  m.latencies.push_back(latency);
  m.requests += 1;
  m.exec_seconds += latency;
  m.tokens += tokens;
  for (const WorkItem* w : described) {
    m.items += 1;
    m.videos += w->modality == EG_MODALITY_VIDEO;
  }
}

}  // namespace

std::vector<Measurement> execute_interleaved(const std::vector<Engine*>& engines,
                                             const std::vector<WorkItem>& work,
                                             const ExecOptions& options,
                                             const std::vector<ResultConsumer>& consumers) {
  for (Engine* engine : engines) check_workload_supported(engine->model(), work);
  const size_t request_size = static_cast<size_t>(std::max<int64_t>(options.request_size, 1));
  const size_t num_requests = (work.size() + request_size - 1) / request_size;
  const size_t n = engines.size();

  Measurement warm;
  for (Engine* engine : engines)
    for (size_t r = 0;
         r < std::min<size_t>(num_requests, static_cast<size_t>(options.warmup_requests)); ++r)
      run_request(*engine, work, request_size, r, false, warm, {});

  std::vector<Measurement> m(n);
  std::vector<Stats> before;
  for (Engine* engine : engines) before.push_back(engine->stats());
  Progress progress(options.label, static_cast<int64_t>(work.size()));
  for (size_t r = 0; r < num_requests; ++r) {
    // Each request runs on every engine, the one going first rotating, so that
    // none always meets the GPU warmer (clocks drift under seconds of load).
    for (size_t k = 0; k < n; ++k) {
      const size_t which = (r + k) % n;
      run_request(*engines[which], work, request_size, r, true, m[which],
                  which < consumers.size() ? consumers[which] : ResultConsumer{});
    }
    if (options.progress) progress.update(m[0].items);
  }
  progress.finish();
  for (size_t k = 0; k < n; ++k) m[k].stats = stats_delta(engines[k]->stats(), before[k]);
  return m;
}

Measurement execute_workload(Engine& engine, const std::vector<WorkItem>& work,
                             const ExecOptions& options, const ResultConsumer& consumer) {
  return execute_interleaved({&engine}, work, options, {consumer}).front();
}

}  // namespace encgraph::host
