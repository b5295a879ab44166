// Statistics: what each batch did on each path (replayed, or eager and why),
// items counted as hits only when every path they send tokens through
// replayed, padding efficiency per path, capture cost; logged every N items.
#pragma once

#include <encgraph/stats.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace encgraph {

// One path of one batch.
struct PathRun {
  int64_t tokens = 0;  // 0: the batch sent nothing through the path
  bool replayed = false;
  int64_t budget = 0;                           // the replayed graph's budget
  EagerReason reason = EagerReason::GraphsOff;  // when not replayed
};

class StatsRecorder {
 public:
  StatsRecorder(std::string plugin, std::vector<std::string> path_names,
                std::vector<std::string> path_units, std::vector<int64_t> token_budgets,
                int64_t log_interval);

  // `item_tokens[k][p]`: what the batch's item k sends through path p.
  void record_batch(const std::vector<PathRun>& paths,
                    const std::vector<const std::vector<int64_t>*>& item_tokens);
  void on_capture(const std::vector<int64_t>& graphs_per_path, int64_t memory_bytes, double seconds,
                  const CapturePhases& phases);
  void on_clear();
  // Logs the hit rate once per log_interval items (debug level).
  void maybe_log();
  Stats snapshot() const;

 private:
  std::string plugin_;
  int64_t log_interval_;
  int64_t next_log_ = 0;
  Stats stats_;
};

}  // namespace encgraph
