#include "serve/serve_metrics.hpp"

#include "serve/infer_protocol.hpp"

#include <cstdio>

namespace encgraph::host::serve {
namespace {

void metric(std::string& s, const char* name, const char* type, const char* help) {
  s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string seconds(int64_t micros) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6f", static_cast<double>(micros) / 1e6);
  return buf;
}

}  // namespace

void ServeMetrics::count_request(int status, double secs) {
  size_t slot = kStatuses.size() - 1;  // any other status
  for (size_t i = 0; i + 1 < kStatuses.size(); ++i)
    if (kStatuses[i] == status) slot = i;
  ++requests_[slot];
  request_micros_ += static_cast<int64_t>(secs * 1e6);
}

void ServeMetrics::count_batch(int64_t items, int64_t requests) {
  ++batches_;
  batch_items_ += items;
  if (requests > 1) ++batches_multi_request_;
}

void ServeMetrics::count_queue_wait(double secs) {
  ++queue_waits_;
  queue_wait_micros_ += static_cast<int64_t>(secs * 1e6);
}

void ServeMetrics::count_cache_only_request(double secs) {
  size_t bucket = 0;  // not cumulative here; render sums them
  while (bucket < kServiceBuckets.size() && secs > kServiceBuckets[bucket]) ++bucket;
  ++cache_only_buckets_[bucket];
  cache_only_nanos_ += static_cast<int64_t>(secs * 1e9);
}

std::string ServeMetrics::render(const std::vector<ModelCache>& caches) const {
  std::string s;
  metric(s, "encgraph_requests_total", "counter", "Infer requests answered, by HTTP status.");
  for (size_t i = 0; i < kStatuses.size(); ++i)
    s += "encgraph_requests_total{code=\"" +
         (kStatuses[i] ? std::to_string(kStatuses[i]) : std::string("other")) + "\"} " +
         std::to_string(requests_[i].load()) + "\n";
  metric(s, "encgraph_request_seconds_total", "counter",
         "Time from a request's arrival to its answer, summed.");
  s += "encgraph_request_seconds_total " + seconds(request_micros_) + "\n";
  metric(s, "encgraph_cache_only_request_seconds", "histogram",
         "Server time of requests answered wholly from the cache: request in hand to response "
         "built.");
  int64_t cumulative = 0;
  for (size_t b = 0; b < cache_only_buckets_.size(); ++b) {
    cumulative += cache_only_buckets_[b].load();
    char le[32];
    if (b < kServiceBuckets.size())
      std::snprintf(le, sizeof(le), "%g", kServiceBuckets[b]);
    else
      std::snprintf(le, sizeof(le), "+Inf");
    s += std::string("encgraph_cache_only_request_seconds_bucket{le=\"") + le + "\"} " +
         std::to_string(cumulative) + "\n";
  }
  char sum[32];
  std::snprintf(sum, sizeof(sum), "%.9f", static_cast<double>(cache_only_nanos_.load()) / 1e9);
  s += std::string("encgraph_cache_only_request_seconds_sum ") + sum + "\n";
  s += "encgraph_cache_only_request_seconds_count " + std::to_string(cumulative) + "\n";
  metric(s, "encgraph_worker_seconds_total", "counter",
         "The model workers' time by phase: prepare (making items), execute (enqueueing a "
         "batch), collect (waiting for its rows and copying them out), answer (handing them "
         "to the requests).");
  for (size_t i = 0; i < kWorkerPhaseNames.size(); ++i) {
    char value[32];
    std::snprintf(value, sizeof value, "%.6f", static_cast<double>(worker_nanos_[i].load()) * 1e-9);
    s += std::string("encgraph_worker_seconds_total{phase=\"") + kWorkerPhaseNames[i] + "\"} " +
         value + "\n";
  }
  metric(s, "encgraph_batches_total", "counter", "Batches handed to the engine.");
  s += "encgraph_batches_total " + std::to_string(batches_.load()) + "\n";
  metric(s, "encgraph_batch_items_total", "counter", "Items in those batches.");
  s += "encgraph_batch_items_total " + std::to_string(batch_items_.load()) + "\n";
  metric(s, "encgraph_batches_multi_request_total", "counter",
         "Batches holding items from more than one request.");
  s += "encgraph_batches_multi_request_total " + std::to_string(batches_multi_request_.load()) +
       "\n";
  metric(s, "encgraph_queue_seconds_total", "counter",
         "Time items waited in the queue before their batch ran, summed.");
  s += "encgraph_queue_seconds_total " + seconds(queue_wait_micros_) + "\n";
  metric(s, "encgraph_queue_items_total", "counter", "Items that went through the queue.");
  s += "encgraph_queue_items_total " + std::to_string(queue_waits_.load()) + "\n";
  metric(s, "encgraph_queued_items", "gauge", "Items waiting for a batch now.");
  s += "encgraph_queued_items " + std::to_string(queued_items_.load()) + "\n";
  metric(s, "encgraph_item_errors_total", "counter",
         "Items the engine could not make or run (plugin or device errors).");
  s += "encgraph_item_errors_total " + std::to_string(item_errors_.load()) + "\n";
  metric(s, "encgraph_batches_split_total", "counter",
         "Batches of several items that failed and were run again item by item, so that only a "
         "faulty item fails.");
  s += "encgraph_batches_split_total " + std::to_string(batches_split_.load()) + "\n";
  const struct {
    const char* name;
    const char* type;
    const char* help;
    int64_t CacheStats::*field;
  } cache_metrics[] = {
      {"encgraph_cache_lookups_total", "counter",
       "Items looked up in the embedding cache: hits + misses + coalesced.", &CacheStats::lookups},
      {"encgraph_cache_hits_total", "counter", "Items answered from the embedding cache.",
       &CacheStats::hits},
      {"encgraph_cache_misses_total", "counter", "Items the engine had to encode.",
       &CacheStats::misses},
      {"encgraph_cache_coalesced_total", "counter",
       "Items that waited for the same image already being encoded (neither hit nor miss).",
       &CacheStats::coalesced},
      {"encgraph_cache_evictions_total", "counter", "Entries evicted to stay within the budget.",
       &CacheStats::evictions},
      {"encgraph_cache_entries", "gauge", "Entries held.", &CacheStats::entries},
      {"encgraph_cache_bytes", "gauge", "Bytes held (never above the budget).", &CacheStats::bytes},
  };
  for (const auto& m : cache_metrics) {
    metric(s, m.name, m.type, m.help);
    for (const ModelCache& c : caches)
      s += std::string(m.name) + "{model=" + json_string(c.model) + "} " +
           std::to_string(c.stats.*m.field) + "\n";
  }
  metric(s, "encgraph_cache_budget_bytes", "gauge", "The cache's byte budget (serve.cache_bytes).");
  for (const ModelCache& c : caches)
    s += "encgraph_cache_budget_bytes{model=" + json_string(c.model) + "} " +
         std::to_string(c.budget) + "\n";
  return s;
}

}  // namespace encgraph::host::serve
