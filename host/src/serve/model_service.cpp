#include "serve/model_service.hpp"

#include "cli.hpp"
#include "safetensors.hpp"
#include "serve/video_input.hpp"

#include <encgraph/error.hpp>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

namespace encgraph::host::serve {
namespace {

// What a queued item carries through the scheduler.
struct Work {
  CacheKey key;
  DecodedImage pixels;
  std::string label;
  bool video = false;
};

// What the plugin is told of a work item (pixels not set).
eg_item_desc describe(const Work& work) {
  eg_item_desc desc{};
  desc.modality = work.video ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
  desc.channels = work.pixels.channels;
  desc.height = work.pixels.height;
  desc.width = work.pixels.width;
  desc.frames = work.video ? work.pixels.frames : 1;
  return desc;
}

// The shared state of one request: filled by cache waiters on any thread.
struct Pending {
  std::vector<ItemPtr> items;
  std::atomic<size_t> remaining{0};
  std::atomic<bool> finished{false};
  bool cache_only = true;  // set before the lookups' hold is released, read after
  ModelService::Done done;

  void finish_error(const std::exception_ptr& error) {
    if (!finished.exchange(true)) done({}, error, false);
  }
  void item_ready() {
    if (--remaining == 0 && !finished.exchange(true)) done(std::move(items), nullptr, cache_only);
  }
};

// A file's identity for the cache: path, size and modification time.
std::string file_identity_text(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  const auto time = std::filesystem::last_write_time(file, ec);
  return file.string() + " " + std::to_string(ec ? 0 : size) + " " +
         std::to_string(ec ? 0 : time.time_since_epoch().count()) + "\n";
}

}  // namespace

CacheKey pixels_key(const DecodedImage& image, bool video, const std::string& model_identity) {
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, image.pixels.data(), image.pixels.size());
  // A one-frame video and an image of the same pixels are different items.
  const int64_t geometry[5] = {image.frames, image.height, image.width, image.channels,
                               video ? 1 : 0};
  XXH3_128bits_update(state, geometry, sizeof(geometry));
  XXH3_128bits_update(state, model_identity.data(), model_identity.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.high64, h.low64};
}

CacheKey file_key(const std::vector<uint8_t>& bytes, bool video) {
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, bytes.data(), bytes.size());
  const uint8_t kind = video ? 'v' : 'i';
  XXH3_128bits_update(state, &kind, 1);
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.high64, h.low64};
}

std::string model_identity(const HostConfig& config) {
  std::string identity = canonical_config(config);
  const std::string& weights = config.runtime.weights;
  if (weights.empty() || weights == "random") return identity;
  std::error_code ec;
  const std::filesystem::path path(weights);
  if (std::filesystem::is_directory(path, ec)) {
    std::set<std::filesystem::path> files;  // sorted: the order of a listing varies
    for (const auto& e : std::filesystem::recursive_directory_iterator(path, ec))
      if (e.is_regular_file(ec)) files.insert(e.path());
    for (const auto& f : files) identity += file_identity_text(f);
  } else {
    identity += file_identity_text(path);
  }
  return identity;
}

ModelService::ModelService(std::string name, const HostConfig& config, ServeMetrics& metrics,
                           const Clock& clock)
    : name_(std::move(name)),
      config_(config),
      metrics_(metrics),
      clock_(clock),
      engine_(make_engine(config.runtime, config.data_parallel)),
      outputs_(engine_->model().outputs()),
      plugin_(engine_->model().plugin_name()),
      identity_(model_identity(config)),
      takes_video_(engine_->model().supports_modality(EG_MODALITY_VIDEO)),
      cache_(config.serve.cache_bytes),
      scheduler_(
          [&] {
            const BudgetPlan& plan = engine_->model().plan();
            BatchLimits limits;
            limits.max_items = std::max<int64_t>(1, plan.max_batch_size);
            limits.max_tokens = plan.token_budgets.empty() ? 1 : plan.token_budgets.back();
            limits.max_delay = std::chrono::microseconds(config.serve.max_queue_delay_us);
            limits.max_queue_items = config.serve.max_queue_items;
            return limits;
          }(),
          clock) {
  if (config.runtime.use_graphs) engine_->capture();
  batches_in_flight_ = config.serve.batches_in_flight;
  if (batches_in_flight_ == 0)
    batches_in_flight_ = engine_->model().device_type() == EG_DEVICE_CPU ? 1 : 2;
  spdlog::info("model '{}': {} batch{} in flight", name_, batches_in_flight_,
               batches_in_flight_ == 1 ? "" : "es");
  worker_ = std::thread([this] { run_worker(); });
}

ModelService::~ModelService() {
  scheduler_.close();
  if (worker_.joinable()) worker_.join();
}

RequestLimits ModelService::request_limits() const {
  return {config_.serve.max_items_per_request, config_.serve.max_pixels,
          config_.limits.max_frames_per_video};
}

DecodedImage ModelService::decode_video(const std::vector<uint8_t>& bytes,
                                        const std::string& label) const {
  return decode_video_bytes(bytes, label, config_.workload.video, config_.serve.max_pixels,
                            config_.limits.max_frames_per_video);
}

void ModelService::infer(uint64_t request_id, std::vector<ServeInput> inputs, Done done) {
  if (!takes_video_)
    for (const ServeInput& in : inputs)
      if (in.video)
        throw ProtocolError(400, in.label + ": model '" + name_ + "' (plugin " + plugin_ +
                                     ") takes no videos; send images");
  auto pending = std::make_shared<Pending>();
  pending->items.resize(inputs.size());
  pending->remaining = inputs.size() + 1;  // + 1: held until every lookup is made
  pending->done = std::move(done);
  std::vector<QueuedItem> claimed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].cached) {  // found by its file's bytes: a hit already counted
      pending->items[i] = std::move(inputs[i].cached);
      pending->item_ready();
      continue;
    }
    const CacheKey key = pixels_key(inputs[i].pixels, inputs[i].video, identity_);
    if (inputs[i].file_key) {
      std::lock_guard<std::mutex> lock(files_mutex_);
      if (pixels_of_file_.size() >= 1 << 20) pixels_of_file_.clear();  // bounded memory
      pixels_of_file_[*inputs[i].file_key] = key;
    }
    auto lookup =
        cache_.lookup(key, [pending, i](const ItemPtr& item, const std::exception_ptr& error) {
          if (error) return pending->finish_error(error);
          pending->items[i] = item;
          pending->item_ready();
        });
    if (lookup.found == EmbeddingCache::Found::Hit) {
      pending->items[i] = lookup.item;
      pending->item_ready();
      continue;
    }
    pending->cache_only = false;
    if (lookup.found == EmbeddingCache::Found::Claimed) {
      auto work = std::make_shared<Work>(
          Work{key, std::move(inputs[i].pixels), std::move(inputs[i].label), inputs[i].video});
      claimed.push_back({request_id, 0, {}, std::move(work)});
    }
  }
  // Every claimed key must end in fulfil or fail: other requests may wait on
  // it. An image the plugin refuses fails alone (and with it this request);
  // the others are still encoded for whoever else waits on them.
  std::vector<QueuedItem> accepted;
  for (QueuedItem& q : claimed) {
    Work& work = *std::static_pointer_cast<Work>(q.work);
    try {
      q.tokens = tokens_for(describe(work));
      accepted.push_back(std::move(q));
    } catch (const Error& e) {
      const bool input = e.kind() == ErrorKind::Input || e.kind() == ErrorKind::Config;
      cache_.fail(work.key, std::make_exception_ptr(
                                ProtocolError(input ? 400 : 500, work.label + ": " + e.what())));
    } catch (...) {
      cache_.fail(work.key, std::current_exception());
    }
  }
  if (!accepted.empty() && !scheduler_.submit(accepted)) {
    const auto full = std::make_exception_ptr(ProtocolError(
        429, "the server's queue is full (" + std::to_string(config_.serve.max_queue_items) +
                 " items, serve.max_queue_items); retry later"));
    for (const QueuedItem& q : accepted)
      cache_.fail(std::static_pointer_cast<Work>(q.work)->key, full);
    return;
  }
  if (!accepted.empty()) metrics_.set_queued_items(scheduler_.queued_items());
  pending->item_ready();  // the lookups' hold
}

std::vector<ItemPtr> ModelService::stored_in_f32(std::vector<ItemPtr> items) {
  for (ItemPtr& item : items) {
    ItemPtr wide = widened_to_f32(*item);
    if (!wide) continue;
    cache_.replace(item->key, item, wide);
    item = std::move(wide);
  }
  return items;
}

ItemPtr ModelService::find_file(const CacheKey& file) {
  CacheKey pixels;
  {
    std::lock_guard<std::mutex> lock(files_mutex_);
    const auto it = pixels_of_file_.find(file);
    if (it == pixels_of_file_.end()) return nullptr;
    pixels = it->second;
  }
  return cache_.find(pixels);
}

int64_t ModelService::tokens_for(const eg_item_desc& desc) {
  const std::array<int64_t, 4> geometry{desc.modality, desc.frames, desc.height, desc.width};
  {
    std::lock_guard<std::mutex> lock(spec_mutex_);
    if (auto it = tokens_by_size_.find(geometry); it != tokens_by_size_.end()) return it->second;
  }
  // The runtime never calls into a plugin instance from two threads at once
  // (docs/plugin-abi.md, "Threads"): a size not seen yet waits for the engine.
  int64_t tokens = 0;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    tokens = engine_->model().spec_for(desc).output_tokens;
  }
  std::lock_guard<std::mutex> lock(spec_mutex_);
  if (tokens_by_size_.size() >= 65536) tokens_by_size_.clear();  // bounded memory
  tokens_by_size_[geometry] = tokens;
  return tokens;
}

void ModelService::count_taken(const std::vector<QueuedItem>& batch) {
  const TimePoint now = clock_.now();
  std::set<uint64_t> requests;
  for (const QueuedItem& q : batch) {
    requests.insert(q.request);
    metrics_.count_queue_wait(std::chrono::duration<double>(now - q.enqueued).count());
  }
  metrics_.count_batch(static_cast<int64_t>(batch.size()), static_cast<int64_t>(requests.size()));
  metrics_.set_queued_items(scheduler_.queued_items());
}

Request ModelService::prepare(const std::vector<QueuedItem>& batch) {
  std::vector<eg_item_desc> descs;
  std::vector<std::string> labels;
  for (const QueuedItem& q : batch) {
    const Work& work = *std::static_pointer_cast<Work>(q.work);
    eg_item_desc desc = describe(work);
    desc.pixels = work.pixels.pixels.data();
    descs.push_back(desc);
    labels.push_back(work.label);
  }
  return engine_->prepare(descs, labels);
}

ModelService::InFlight ModelService::launch(std::vector<QueuedItem> batch,
                                            std::optional<Request> request) {
  InFlight f;
  f.batch = std::move(batch);
  f.request = std::move(request);
  try {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    if (!f.request) {
      const TimePoint t0 = clock_.now();
      f.request = prepare(f.batch);
      metrics_.count_worker(WorkerPhase::Prepare, seconds_since(t0));
    }
    const TimePoint t0 = clock_.now();
    f.result = engine_->execute(*f.request);
    metrics_.count_worker(WorkerPhase::Execute, seconds_since(t0));
  } catch (...) {
    f.failure = std::current_exception();
  }
  return f;
}

void ModelService::finish(InFlight& f) {
  if (f.result) {
    try {
      TimePoint t0 = clock_.now();
      const Collected items = collect(f.batch, *f.result);
      metrics_.count_worker(WorkerPhase::Collect, seconds_since(t0));
      t0 = clock_.now();
      fulfil(f.batch, items);
      metrics_.count_worker(WorkerPhase::Answer, seconds_since(t0));
    } catch (...) {
      f.failure = std::current_exception();
    }
  }
  // The request lives until its rows are copied back: the device may read
  // its items' buffers until then. Destroying its items calls the plugin,
  // which no other thread may be calling meanwhile.
  f.result.reset();
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    f.request.reset();
  }
  if (f.failure) batch_failed(f.batch, f.failure);
}

std::vector<QueuedItem> ModelService::take_due() {
  std::vector<QueuedItem> next = scheduler_.take_due(clock_.now());
  if (!next.empty()) count_taken(next);
  return next;
}

std::vector<QueuedItem> ModelService::wait_batch() {
  std::vector<QueuedItem> next = scheduler_.wait_batch();
  if (!next.empty()) count_taken(next);
  return next;
}

std::optional<Request> ModelService::make_items(const std::vector<QueuedItem>& batch) {
  try {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    const TimePoint t0 = clock_.now();
    std::optional<Request> made = prepare(batch);
    metrics_.count_worker(WorkerPhase::Prepare, seconds_since(t0));
    return made;
  } catch (...) {
    return std::nullopt;
  }
}

void ModelService::run_worker() {
  // Two in flight: the next due batch is made and queued on the device
  // behind the running one before that one's rows are collected, so the
  // device computes it while those rows are copied out (on a stream of their
  // own) and answered. One in flight: only the next batch's items are made
  // while the device runs (a CPU engine runs a batch inside execute, where
  // queuing the next would hold this one's answer for a whole batch).
  const bool two_in_flight = batches_in_flight_ == 2;
  std::vector<QueuedItem> batch = wait_batch();
  if (batch.empty()) return;
  InFlight running = launch(std::move(batch));
  while (true) {
    std::optional<InFlight> next;
    std::vector<QueuedItem> due = take_due();
    if (!due.empty()) {
      if (two_in_flight) {
        next = launch(std::move(due));
      } else {
        // Made now, queued once this batch is answered. A failure here is
        // met again, and handled, when that batch runs.
        std::optional<Request> made = make_items(due);
        finish(running);
        running = launch(std::move(due), std::move(made));
        continue;
      }
    }
    finish(running);
    if (!next) {
      std::vector<QueuedItem> waited = wait_batch();
      if (waited.empty()) return;
      next = launch(std::move(waited));
    }
    running = std::move(*next);
  }
}

void ModelService::run_batch(std::vector<QueuedItem>& batch) {
  std::optional<Request> request;
  std::exception_ptr failure;
  try {
    std::unique_lock<std::mutex> lock(engine_mutex_);
    request = prepare(batch);
    const Result result = engine_->execute(*request);
    lock.unlock();  // copying the rows out and answering need no engine
    deliver(batch, result);
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);  // its items' destruction calls the plugin
    request.reset();
  }
  if (failure) batch_failed(batch, failure);
}

void ModelService::batch_failed(std::vector<QueuedItem>& batch, const std::exception_ptr& failure) {
  if (batch.size() > 1) {
    // One bad item must not fail the others: each runs alone to find it.
    metrics_.count_batch_split();
    for (QueuedItem& q : batch) {
      std::vector<QueuedItem> one{q};
      run_batch(one);
    }
    return;
  }
  const Work& work = *std::static_pointer_cast<Work>(batch[0].work);
  metrics_.count_item_errors(1);
  std::exception_ptr error = failure;
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    spdlog::warn("model '{}': {} failed: {}", name_, work.label, e.what());
    error = std::make_exception_ptr(
        ProtocolError(e.kind() == ErrorKind::Input ? 400 : 500, work.label + ": " + e.what()));
  } catch (const std::exception& e) {
    spdlog::warn("model '{}': {} failed: {}", name_, work.label, e.what());
    error = std::make_exception_ptr(ProtocolError(500, work.label + ": " + e.what()));
  } catch (...) {
  }
  cache_.fail(work.key, error);
}

ModelService::Collected ModelService::collect(const std::vector<QueuedItem>& batch,
                                              const Result& result) {
  if (result.size() != batch.size() || result.num_outputs() != outputs_.size())
    throw Error(ErrorKind::Internal, "the engine returned " + std::to_string(result.size()) +
                                         " items for a batch of " + std::to_string(batch.size()));
  Collected items(batch.size());
  // Each item's rows go from the device straight into its own buffer: one
  // host copy, not a whole-batch staging copy and then a second one per item.
  for (size_t i = 0; i < batch.size(); ++i) {
    items[i] = std::make_shared<ItemOutputs>();
    items[i]->key = std::static_pointer_cast<Work>(batch[i].work)->key;
  }
  for (size_t o = 0; o < result.num_outputs(); ++o) {
    for (size_t i = 0; i < batch.size(); ++i) {
      ItemOutput out;
      out.dtype = result.dtype(o);
      out.rows = result.rows(i, o);
      out.width = result.hidden_size(o);
      out.bytes.resize(static_cast<size_t>(out.rows * out.width) * dtype_bytes(out.dtype));
      result.copy_item_to_host(i, o, out.bytes.data());
      items[i]->outputs.push_back(std::move(out));
    }
  }
  result.wait();
  return items;
}

void ModelService::fulfil(const std::vector<QueuedItem>& batch, const Collected& items) {
  for (size_t i = 0; i < batch.size(); ++i)
    cache_.fulfil(std::static_pointer_cast<Work>(batch[i].work)->key, items[i]);
}

void ModelService::deliver(const std::vector<QueuedItem>& batch, const Result& result) {
  fulfil(batch, collect(batch, result));
}

}  // namespace encgraph::host::serve
