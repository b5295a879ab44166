// The toy's options: every key of its [plugin.config] table, read and bounded
// once (both forms take every key).
#pragma once

#include <encgraph/sdk/config.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace toy {

struct Options {
  std::string plugin;  // "toy" or "toy_dual": prefixes messages
  int64_t hidden = 8;
  int64_t patch = 14;
  int64_t min_budget = 64;
  int64_t max_budget = 4096;
  int64_t local_min_tokens = 4;  // toy_dual: items below this skip the local path
  int64_t local_min_budget = 0;  // toy_dual: the local path's minimum budget
  int64_t max_frames_per_video = 8;
  int64_t extra_kernels = 0;         // tiny launches per forward (launch-overhead benchmark)
  int64_t cpu_us_per_1k_tokens = 0;  // CPU: a forward also sleeps this per 1024 budget tokens
  // CPU: an eager forward sleeps this much more per 1024 tokens: eager costing
  // more than replays of other budgets suggest (the cost model's tests).
  int64_t cpu_eager_us_per_1k_tokens = 0;
  bool check_padding = true;  // CPU: verify padded rows before computing
  bool pooled = true;         // declare output "pooled" (off: one output, as a 1.0 model)
  float bias = 0.5f;
  std::vector<int64_t> axis_keys;  // one capture axis "frames" when non-empty
};

// Reads every key; `weights` must be unset, "random" or "none" (no weights).
Options parse_options(encgraph::sdk::Config& config, const std::optional<std::string>& weights);

// a * b, or an input error naming `what` (sizes computed from items and budgets).
int64_t checked_mul(const Options& o, int64_t a, int64_t b, const char* what);

}  // namespace toy
