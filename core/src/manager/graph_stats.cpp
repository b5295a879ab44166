#include "graph_stats.hpp"

#include <spdlog/spdlog.h>

namespace encgraph {

StatsRecorder::StatsRecorder(std::string plugin, std::vector<std::string> path_names,
                             std::vector<std::string> path_units,
                             std::vector<int64_t> token_budgets, int64_t log_interval)
    : plugin_(std::move(plugin)), log_interval_(log_interval) {
  stats_.token_budgets = std::move(token_budgets);
  stats_.paths.resize(path_names.size());
  for (size_t p = 0; p < path_names.size(); ++p) {
    stats_.paths[p].name = path_names[p];
    stats_.paths[p].unit = path_units.at(p);
  }
}

void StatsRecorder::record_batch(const std::vector<PathRun>& paths,
                                 const std::vector<const std::vector<int64_t>*>& item_tokens) {
  bool any_replayed = false, any_eager = false, chose_eager = false;
  for (size_t p = 0; p < paths.size(); ++p) {
    const PathRun& run = paths[p];
    if (run.tokens == 0) continue;
    PathStats& ps = stats_.paths[p];
    if (run.replayed) {
      any_replayed = true;
      ++ps.batches_graph;
      ps.real_tokens += run.tokens;
      ps.budget_tokens += run.budget;
      stats_.real_tokens += run.tokens;
      stats_.budget_tokens += run.budget;
    } else {
      any_eager = true;
      ++ps.batches_eager;
      ++ps.eager_by_reason[static_cast<int>(run.reason)];
      chose_eager = chose_eager || run.reason == EagerReason::ChosenFaster;
    }
  }
  if (any_replayed && any_eager)
    ++stats_.batches_mixed;
  else if (any_replayed)
    ++stats_.batches_graph;
  else
    ++stats_.batches_eager;
  if (chose_eager) ++stats_.batches_eager_chosen;

  for (const std::vector<int64_t>* tokens : item_tokens) {
    // A hit only when every path the item uses replayed (an item using no
    // path is a hit when the batch replayed anything).
    bool used_any = false, hit = true;
    for (size_t p = 0; p < paths.size(); ++p)
      if ((*tokens)[p] > 0) {
        used_any = true;
        hit = hit && paths[p].replayed;
      }
    if (!used_any) hit = any_replayed;
    ++(hit ? stats_.graph_hits : stats_.graph_misses);
  }
}

void StatsRecorder::on_capture(const std::vector<int64_t>& graphs_per_path, int64_t memory_bytes,
                               double seconds, const CapturePhases& phases) {
  stats_.num_graphs = 0;
  for (size_t p = 0; p < graphs_per_path.size(); ++p) {
    stats_.paths[p].graphs = graphs_per_path[p];
    stats_.num_graphs += graphs_per_path[p];
  }
  stats_.graph_memory_bytes = memory_bytes;
  stats_.capture_seconds = seconds;
  stats_.capture_phases = phases;
}

void StatsRecorder::on_clear() {
  stats_.num_graphs = 0;
  stats_.graph_memory_bytes = 0;
  for (auto& p : stats_.paths) p.graphs = 0;
}

void StatsRecorder::maybe_log() {
  if (log_interval_ <= 0) return;
  const int64_t total = stats_.graph_hits + stats_.graph_misses;
  if (total < next_log_ + log_interval_) return;
  next_log_ = total - total % log_interval_;
  const Stats s = snapshot();
  std::string per_path;
  for (const PathStats& p : s.paths)
    per_path +=
        fmt::format("; {}: {} graph / {} eager batches, {} of {} budget {} used", p.name,
                    p.batches_graph, p.batches_eager, p.real_tokens, p.budget_tokens, p.unit);
  spdlog::debug(
      "graph stats for '{}': hits={}, misses={}, hit_rate={:.1f}%, padded-token "
      "efficiency={:.1f}%{}",
      plugin_, s.graph_hits, s.graph_misses, 100.0 * s.hit_rate, 100.0 * s.padded_token_efficiency,
      per_path);
}

Stats StatsRecorder::snapshot() const {
  Stats s = stats_;
  const int64_t total = s.graph_hits + s.graph_misses;
  s.hit_rate = total > 0 ? static_cast<double>(s.graph_hits) / total : 0.0;
  s.padded_token_efficiency =
      s.budget_tokens > 0 ? static_cast<double>(s.real_tokens) / s.budget_tokens : 0.0;
  return s;
}

}  // namespace encgraph
