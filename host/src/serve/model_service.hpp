// One served model: its engine, embedding cache and batch scheduler, and the
// worker thread that hands each due batch to the engine as one request
// (Engine::prepare + execute). Requests come in as decoded images; each is
// looked up in the cache (hits skip the engine, concurrent requests for one
// image share one encoding), the misses are queued, and the request's
// callback runs once every image has its outputs or one has failed.
#pragma once

#include "config.hpp"
#include "image_io.hpp"
#include "serve/batch_scheduler.hpp"
#include "serve/embedding_cache.hpp"
#include "serve/infer_protocol.hpp"
#include "serve/serve_metrics.hpp"

#include <encgraph/engine.hpp>

#include <array>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace encgraph::host::serve {

// One item of a request: an image, or a video's frames, decoded; or, for a
// file whose bytes were seen before, the outputs found by them.
struct ServeInput {
  DecodedImage pixels;
  std::string label;  // what errors name: "images[2]", "videos[0]"
  bool video = false;
  ItemPtr cached;                    // found by file_key: pixels left empty
  std::optional<CacheKey> file_key;  // a file's: remembered with its pixels' key
};

// The key of a file's bytes (an image or video file as sent): XXH3-128 of
// the bytes and whether they are a video. Decoding is deterministic, so the
// same bytes always give the same pixels.
CacheKey file_key(const std::vector<uint8_t>& bytes, bool video);

// The cache key of decoded pixels under a model: xxHash's XXH3-128 of the
// pixels, their geometry, whether they are a video and `model_identity`
// (what else decides the outputs).
CacheKey pixels_key(const DecodedImage& image, bool video, const std::string& model_identity);

// What decides a model's outputs besides the pixels: the resolved settings
// (plugin, its config, budgets: canonical_config) and, when the weights are
// files, each one's path, size and modification time; with random weights the
// settings alone (their seed is part of the plugin's config).
std::string model_identity(const HostConfig& config);

class ModelService {
 public:
  // Loads the engine (and captures its graphs when runtime.use_graphs).
  ModelService(std::string name, const HostConfig& config, ServeMetrics& metrics,
               const Clock& clock);
  // Refuses new work, finishes what is queued, joins the worker.
  ~ModelService();
  ModelService(const ModelService&) = delete;
  ModelService& operator=(const ModelService&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<OutputSpec>& outputs() const { return outputs_; }
  const std::string& plugin_name() const { return plugin_; }
  RequestLimits request_limits() const;
  int64_t max_pixels() const { return config_.serve.max_pixels; }
  // Whether the plugin takes videos ("videos" and "frames" inputs).
  bool takes_video() const { return takes_video_; }
  // A video file's sampled frames, as `encgraph encode` decodes it under this model's config.
  DecodedImage decode_video(const std::vector<uint8_t>& bytes, const std::string& label) const;

  // items[i]: image i's outputs; or the first error (a ProtocolError, an
  // encgraph::Error); called once, from any thread. `cache_only`: every image
  // was a cache hit (the request never waited for the engine), which is what
  // the server's per-hit overhead is measured on.
  using Done =
      std::function<void(std::vector<ItemPtr> items, std::exception_ptr error, bool cache_only)>;
  void infer(uint64_t request_id, std::vector<ServeInput> inputs, Done done);

  // `items` with every bf16 output widened to f32, for an answer in FP32; the
  // cache then stores the widened form in their place (charged at its size),
  // so that later FP32 answers send the stored bytes as they are. Exact: a
  // BF16 answer from the widened form rounds each value back to itself.
  std::vector<ItemPtr> stored_in_f32(std::vector<ItemPtr> items);

  // The stored outputs of a file sent before (its file_key), counted as a
  // cache hit; null when its pixels' key is unknown or no longer stored.
  // Skips decoding and hashing the pixels of a repeated file.
  ItemPtr find_file(const CacheKey& file);

  CacheStats cache_stats() const { return cache_.stats(); }
  int64_t cache_budget() const { return cache_.byte_budget(); }
  int64_t queued_items() const { return scheduler_.queued_items(); }

 private:
  // The output tokens of an item of desc's geometry, remembered per geometry
  // so that a request rarely waits for a running batch to ask the plugin.
  int64_t tokens_for(const eg_item_desc& desc);
  void run_worker();
  // A batch queued on the engine (or failed on the way): its items live in
  // `request` until its rows are copied back.
  struct InFlight {
    std::vector<QueuedItem> batch;
    std::optional<Request> request;
    std::optional<Result> result;
    std::exception_ptr failure;
  };
  // Makes the batch's items (unless `request` holds them) and queues it on the engine.
  InFlight launch(std::vector<QueuedItem> batch, std::optional<Request> request = std::nullopt);
  // The batch's items made ahead (counted as the prepare phase); none when
  // that fails, which launch then meets again and reports.
  std::optional<Request> make_items(const std::vector<QueuedItem>& batch);
  // Collects and answers a launched batch, or fails it (item by item).
  void finish(InFlight& f);
  // The scheduler's due batch (or none) and the next batch (none once closed), counted.
  std::vector<QueuedItem> take_due();
  std::vector<QueuedItem> wait_batch();
  // Counts a batch taken from the queue: its items' waits, its requests.
  void count_taken(const std::vector<QueuedItem>& batch);
  // Makes the batch's items (the plugin's preprocessing); engine_mutex_ held.
  Request prepare(const std::vector<QueuedItem>& batch);
  // Runs the batch (prepare, execute, deliver) on its own; when that fails,
  // each item alone, so that only the faulty one fails.
  void run_batch(std::vector<QueuedItem>& batch);
  // The batch failed with `failure`: each item alone when it holds several,
  // else the item's waiters get the error (400 for bad input, else 500).
  void batch_failed(std::vector<QueuedItem>& batch, const std::exception_ptr& failure);
  // A batch's rows on the host, one entry per item (deliver's two halves:
  // collect waits for the device and copies the rows out; fulfil hands them
  // to the cache and so to the waiting requests, whose answers it builds).
  using Collected = std::vector<std::shared_ptr<ItemOutputs>>;
  Collected collect(const std::vector<QueuedItem>& batch, const Result& result);
  void fulfil(const std::vector<QueuedItem>& batch, const Collected& items);
  void deliver(const std::vector<QueuedItem>& batch, const Result& result);
  double seconds_since(TimePoint start) const {
    return std::chrono::duration<double>(clock_.now() - start).count();
  }

  const std::string name_;
  const HostConfig config_;
  ServeMetrics& metrics_;
  const Clock& clock_;
  std::unique_ptr<Engine> engine_;
  std::vector<OutputSpec> outputs_;
  std::string plugin_;
  std::string identity_;
  bool takes_video_ = false;
  int64_t batches_in_flight_ = 1;  // serve.batches_in_flight, 0 resolved
  std::mutex engine_mutex_;        // one call into the engine (and its plugin) at a time
  std::mutex spec_mutex_;          // tokens_by_size_
  std::map<std::array<int64_t, 4>, int64_t> tokens_by_size_;  // modality, frames, height, width
  std::mutex files_mutex_;                                    // pixels_of_file_
  std::unordered_map<CacheKey, CacheKey, CacheKeyHash> pixels_of_file_;  // file key -> pixels key
  EmbeddingCache cache_;
  BatchScheduler scheduler_;
  std::thread worker_;  // last: starts once everything above exists
};

}  // namespace encgraph::host::serve
