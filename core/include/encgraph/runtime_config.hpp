// How a Runtime is made: which plugin, where, on which device, with what
// weights and settings, and how its budget graphs are planned.
#pragma once

#include <encgraph/budget_plan.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace encgraph {

struct RuntimeConfig {
  std::string plugin;                              // plugin name
  std::vector<std::filesystem::path> plugin_dirs;  // searched first
  std::string device = "auto";                     // "auto", "cpu", "cuda", "cuda:N"
  std::string weights;                             // path, "random", or empty (plugin default)
  std::vector<std::pair<std::string, std::string>> plugin_config;  // flattened key/values
  // [plugin.tuning]: options every plugin reads through the host table
  // (tuning_options.hpp); process-wide, set when the Runtime is made.
  std::vector<std::pair<std::string, std::string>> tuning;
  BudgetRequest budgets;
  bool use_graphs = true;            // false: every batch runs eagerly at its exact size
  bool drop_budget_on_oom = false;   // out of memory while capturing a budget: drop it, warn
  int64_t stats_log_interval = 100;  // log hit statistics every N items (0: never)
  // After capture, time each graph; run a batch eagerly at its exact size when
  // that is expected to be clearly faster than replaying a much larger budget.
  bool prefer_faster_path = true;
  // With prefer_faster_path: split a request's first batch into a small head
  // and the rest when the graphs' replay times and the measured host staging
  // say that overlapping the rest's staging with the head's replay is faster
  // (docs/architecture.md, "Execute").
  bool pipeline_first_batch = true;
  // CUDA: copy a replay's large inputs (spans of 1 MiB and more) to the device
  // on a second stream, overlapping the replay before, through two device
  // mirrors of the largest graph's inputs reserved after capture. false copies
  // in line and saves that memory (docs/architecture.md, "Execute").
  bool overlap_uploads = true;
  // Threads that make a request's items (the plugin's preprocessing) when the
  // plugin allows it (ABI 1.4, EG_PLUGIN_CONCURRENT_ITEMS); 0: one per core,
  // at most 8; 1: on the caller's thread. At most kMaxItemThreads.
  int item_threads = 0;
  static constexpr int kMaxItemThreads = 64;
  // Debugging (and `encgraph verify`): fill every output, workspace and input
  // buffer with NaN bytes before each run, so rows nobody wrote show.
  bool poison_memory = false;
};

}  // namespace encgraph
