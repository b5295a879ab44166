#include <encgraph/stats.hpp>

#include <algorithm>

namespace encgraph {

const char* eager_reason_name(EagerReason reason) {
  switch (reason) {
    case EagerReason::GraphsOff: return "graphs off";
    case EagerReason::TooLarge: return "too large";
    case EagerReason::TooManyFrames: return "too many frames";
    case EagerReason::NoGraphForAxis: return "no graph for axis keys";
    case EagerReason::ChosenFaster: return "chosen as faster";
  }
  return "unknown";
}

namespace {

double ratio(int64_t num, int64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

void add_path(PathStats& a, const PathStats& b) {
  if (a.name.empty()) a.name = b.name;
  if (a.unit.empty()) a.unit = b.unit;
  a.graphs = std::max(a.graphs, b.graphs);  // every rank captures the same graphs
  a.batches_graph += b.batches_graph;
  a.batches_eager += b.batches_eager;
  for (size_t r = 0; r < a.eager_by_reason.size(); ++r)
    a.eager_by_reason[r] += b.eager_by_reason[r];
  a.real_tokens += b.real_tokens;
  a.budget_tokens += b.budget_tokens;
}

}  // namespace

void accumulate(Stats& a, const Stats& b) {
  a.graph_hits += b.graph_hits;
  a.graph_misses += b.graph_misses;
  a.hit_rate = ratio(a.graph_hits, a.graph_hits + a.graph_misses);
  // Ranks run the same plan: the graphs and budgets are one rank's, not a sum.
  a.num_graphs = std::max(a.num_graphs, b.num_graphs);
  if (a.token_budgets.empty()) a.token_budgets = b.token_budgets;
  a.real_tokens += b.real_tokens;
  a.budget_tokens += b.budget_tokens;
  a.padded_token_efficiency = ratio(a.real_tokens, a.budget_tokens);
  a.batches_graph += b.batches_graph;
  a.batches_eager += b.batches_eager;
  a.batches_mixed += b.batches_mixed;
  a.batches_eager_chosen += b.batches_eager_chosen;
  // Capture figures are each rank's own (ranks capture the same plan): the
  // largest, with the phases of that same rank's capture.
  if (b.capture_seconds > a.capture_seconds) a.capture_phases = b.capture_phases;
  a.capture_seconds = std::max(a.capture_seconds, b.capture_seconds);
  a.graph_memory_bytes = std::max(a.graph_memory_bytes, b.graph_memory_bytes);
  if (a.paths.size() < b.paths.size()) a.paths.resize(b.paths.size());
  for (size_t p = 0; p < b.paths.size(); ++p) add_path(a.paths[p], b.paths[p]);
}

}  // namespace encgraph
