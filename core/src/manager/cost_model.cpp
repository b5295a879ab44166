#include "cost_model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace encgraph {

CostModel::CostModel(RunTiming& timing, const PluginInstance& plugin)
    : timing_(timing), plugin_(plugin) {}

double calibration_time_ms(const std::function<double()>& time_once, bool warm_up) {
  // A long run (a large budget's replay) is timed once: launch jitter of a
  // few microseconds is far below the 10% margin eager_expected_faster keeps,
  // while every extra replay costs as much as a forward of that budget (on
  // the Qwen2.5-VL bench config, 1 warm + 3 timed replays of its 20 graphs
  // were about 5.6 s of a 7.3 s capture on an H200). A short run (small budgets, the latency
  // case) takes the median of three more, where jitter is a sizeable part of
  // it; its first run was then the warm-up.
  if (warm_up) time_once();
  double t[3] = {time_once(), 0.0, 0.0};
  if (t[0] >= kShortRunMs) return t[0];
  for (double& v : t) v = time_once();
  std::sort(t, t + 3);
  return t[1];
}

std::vector<double> replay_estimates_from_warmups(const std::vector<int64_t>& budgets,
                                                  const std::vector<double>& warmup_ms,
                                                  double first_replay_ms, double last_replay_ms) {
  const size_t n = budgets.size();
  std::vector<double> out(n, -1.0);
  if (n < 3 || warmup_ms.size() != n) return out;
  // The largest graph's replay/warm-up ratio: its warm-up ran first (capture
  // goes largest first), so a cold start (GEMM tuning, modules loading) shows
  // there. The smallest graph's ratio cannot vote: its warm-up, an eager run,
  // pays launch gaps its replay does not.
  if (!(warmup_ms.back() >= kShortRunMs) || !(last_replay_ms > 0.0) || !(first_replay_ms >= 0.0))
    return out;
  const double scale = last_replay_ms / warmup_ms.back();
  if (!(scale >= kWarmupScaleMin && scale <= kWarmupScaleMax)) return out;
  const double span = static_cast<double>(budgets.back() - budgets.front());
  for (size_t i = 1; i + 1 < n; ++i) {
    if (!(warmup_ms[i] >= kShortRunMs)) continue;  // short: launch jitter, time it
    const double f = span > 0.0 ? static_cast<double>(budgets[i] - budgets.front()) / span : 1.0;
    const double estimate = warmup_ms[i] * scale;
    const double line = first_replay_ms + (last_replay_ms - first_replay_ms) * f;
    // Two-sided: a warm-up slowed by a first-use cost, or one that ran
    // suspiciously fast, is timed instead.
    if (estimate <= kWarmupOutlier * line && estimate * kWarmupOutlier >= line) out[i] = estimate;
  }
  return out;
}

void CostModel::calibrate(CaptureCache& cache) {
  // Uncalibrated until the end: a timing that throws must not leave a model
  // that looks calibrated with graphs still at replay_ms 0.
  eager_overhead_ms_.clear();
  const int num_paths = plugin_.info().num_paths;
  std::vector<double> overhead(num_paths, 0.0);
  timed_ = estimated_ = 0;
  std::vector<int64_t> smallest(num_paths, 0);
  auto time_replay = [&](CapturedGraph& g) {
    RecordedGraph* graph = g.graph.get();
    // No warm-up run: its kernels ran in the capture's warm-up forward and the
    // graph was uploaded when it was instantiated.
    g.replay_ms = calibration_time_ms(
        [&] {
          return timing_.time_ms({TimedWork::Replay, g.shape}, [graph] { graph->replay(); });
        },
        false);
    ++timed_;
  };
  // Groups as eager_expected_faster compares them: one path, one set of axis
  // keys, by budget (the cache's order).
  std::map<std::pair<int32_t, std::vector<int64_t>>,
           std::vector<std::pair<int64_t, CapturedGraph*>>>
      groups;  // (budget, graph)
  for (auto& [key, g] : cache.graphs()) {
    groups[{key.path, key.axis_keys}].emplace_back(key.budget, &g);
    if (smallest[key.path] == 0 || key.budget < smallest[key.path]) smallest[key.path] = key.budget;
  }
  for (auto& [group_key, members] : groups) {
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    CapturedGraph& first = *members.front().second;
    CapturedGraph& last = *members.back().second;
    time_replay(first);
    if (members.size() > 1) time_replay(last);
    std::vector<int64_t> budgets;
    std::vector<double> warmups;
    for (const auto& [budget, g] : members) {
      budgets.push_back(budget);
      warmups.push_back(g->warmup_ms);
    }
    const auto estimates =
        replay_estimates_from_warmups(budgets, warmups, first.replay_ms, last.replay_ms);
    for (size_t i = 1; i + 1 < members.size(); ++i) {
      if (estimates[i] >= 0.0) {
        members[i].second->replay_ms = estimates[i];
        ++estimated_;
      } else {
        time_replay(*members[i].second);
      }
    }
  }
  for (auto& [key, g] : cache.graphs())  // fresh timings: earlier feedback no longer applies
    g.eager_not_faster_from = std::numeric_limits<int64_t>::max();
  // Eager costs the same kernels plus launch gaps: time the forward called
  // directly on the smallest graph's own buffers.
  for (auto& [key, g] : cache.graphs()) {
    if (key.budget != smallest[key.path]) continue;
    auto fn = plugin_.api()->forward_eager ? plugin_.api()->forward_eager : plugin_.api()->forward;
    const double eager_ms = calibration_time_ms(
        [&] {
          return timing_.time_ms({TimedWork::EagerCalibration, g.shape}, [&] {
            plugin_.call("eager forward (calibration)", &g.shape,
                         [&](eg_error* e) { return fn(plugin_.handle(), &g.args, e); });
          });
        },
        true);  // forward_eager may not have run yet: a warm-up first
    overhead[key.path] = std::max(0.0, eager_ms - g.replay_ms);
  }
  eager_overhead_ms_ = std::move(overhead);
}

bool CostModel::eager_expected_faster(const CaptureCache& cache, const CapturedGraph& graph,
                                      int64_t tokens) const {
  if (!calibrated() || tokens >= graph.eager_not_faster_from) return false;
  // Replay times of this path's graphs with the same axis keys, by budget.
  std::vector<std::pair<int64_t, double>> times;
  for (const auto& [key, g] : cache.graphs())
    if (key.path == graph.shape.path &&
        std::equal(key.axis_keys.begin(), key.axis_keys.end(), graph.shape.axis_keys))
      times.emplace_back(key.budget, g.replay_ms);
  if (times.size() < 2) return false;
  std::sort(times.begin(), times.end());
  double estimate = times.front().second;
  for (size_t i = 1; i < times.size(); ++i) {
    if (tokens <= times[i].first) {
      const auto [b0, t0] = times[i - 1];
      const auto [b1, t1] = times[i];
      estimate = tokens <= b0 ? t0 : t0 + (t1 - t0) * double(tokens - b0) / double(b1 - b0);
      break;
    }
  }
  estimate += eager_overhead_ms_[graph.shape.path];
  // A margin: eager also pays buffer preparation the replay does not. 10%:
  // on an H200 a Qwen3-VL video batch padded from 8960 to 10240 tokens
  // replays 8% slower than it runs eagerly, which a 20% margin kept on the
  // graph; batches of small images (launch-bound) stay on graphs because the
  // measured eager overhead is part of the estimate.
  return estimate < 0.9 * graph.replay_ms;
}

bool eager_choice_withdrawn(CapturedGraph& graph, int64_t tokens, double eager_ms) {
  if (!(eager_ms >= graph.replay_ms)) return false;  // faster as expected (or no figure)
  graph.eager_not_faster_from = std::min(graph.eager_not_faster_from, tokens);
  return true;
}

}  // namespace encgraph
