#include "batch_executor.hpp"

#include "pipeline_split.hpp"

#include <spdlog/spdlog.h>
#include <encgraph/budget_plan.hpp>

#include <algorithm>
#include <cmath>

namespace encgraph {

BatchExecutor::BatchExecutor(std::shared_ptr<DeviceBackend> backend, RunTiming& timing,
                             const PluginInstance& plugin, const RuntimeConfig& config, Parts parts)
    : backend_(std::move(backend)),
      timing_(timing),
      plugin_(plugin),
      config_(config),
      parts_(parts) {}

bool BatchExecutor::choose_graph(int32_t path, const PackedBatch& batch,
                                 const std::vector<int64_t>& axis_keys, ExecuteMode mode,
                                 bool too_many_frames, CapturedGraph*& graph,
                                 CapturedGraph*& skipped, EagerReason& reason) const {
  graph = nullptr;
  skipped = nullptr;
  if (mode != ExecuteMode::Planned || !config_.use_graphs || !parts_.cache.captured()) {
    reason = EagerReason::GraphsOff;
    return false;
  }
  if (too_many_frames) {
    reason = EagerReason::TooManyFrames;
    return false;
  }
  const std::optional<int64_t>& budget = batch.path_budget[path];
  if (!budget || *budget <= 0) {
    reason = EagerReason::TooLarge;
    return false;
  }
  graph = parts_.cache.find(GraphKey{path, *budget, axis_keys});
  if (!graph) {
    reason = EagerReason::NoGraphForAxis;
    return false;
  }
  if (config_.prefer_faster_path &&
      parts_.cost.eager_expected_faster(parts_.cache, *graph, batch.path_tokens[path])) {
    skipped = graph;
    graph = nullptr;
    reason = EagerReason::ChosenFaster;
    return false;
  }
  return true;
}

void BatchExecutor::collect_eager_feedback() {
  for (size_t i = 0; i < eager_checks_.size();) {
    EagerCheck& check = eager_checks_[i];
    const double ms = check.timer->elapsed_ms();
    if (ms < 0.0) {  // still running
      ++i;
      continue;
    }
    // NaN: the timing failed. A missing graph: cleared since (a new capture
    // forgets its checks first, see forget_checks).
    CapturedGraph* graph = std::isnan(ms) ? nullptr : parts_.cache.find(check.skipped);
    if (graph != nullptr)
      if (eager_choice_withdrawn(*graph, check.tokens, ms))
        spdlog::info(
            "'{}': an eager run of {} {} on path '{}' took {:.2f} ms; the graph of {} {} it was "
            "chosen over replays in {:.2f} ms: that graph replays such batches from now on",
            plugin_.name(), check.tokens, parts_.plan.path_unit(check.skipped.path),
            parts_.plan.path_name(check.skipped.path), ms, check.skipped.budget,
            parts_.plan.path_unit(check.skipped.path), graph->replay_ms);
    eager_checks_.erase(eager_checks_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  for (size_t i = 0; i < staging_checks_.size();) {
    const double ms = staging_checks_[i].timer->elapsed_ms();
    if (ms < 0.0) {
      ++i;
      continue;
    }
    if (std::isfinite(ms) && staging_checks_[i].tokens > 0) {
      const double per_token = ms / static_cast<double>(staging_checks_[i].tokens);
      // A running mean that follows a change of machine load within a few requests.
      staging_ms_per_token_ =
          staging_ms_per_token_ > 0.0 ? 0.75 * staging_ms_per_token_ + 0.25 * per_token : per_token;
    }
    staging_checks_.erase(staging_checks_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

std::optional<double> BatchExecutor::replay_ms_for(int64_t tokens) const {
  const std::vector<int64_t>& budgets = parts_.cache.packing_budgets().at(0);
  // The line's ends: the smallest positive and the largest budget (a path
  // allowing empty batches has a budget of 0 and no graph for it).
  const auto first = std::upper_bound(budgets.begin(), budgets.end(), int64_t{0});
  const std::optional<int64_t> fit = smallest_fitting_budget(budgets, std::max<int64_t>(tokens, 1));
  if (!fit || first == budgets.end() || *first == budgets.back()) return std::nullopt;
  const CapturedGraph* graph = parts_.cache.find(GraphKey{0, *fit, {}});
  const CapturedGraph* small = parts_.cache.find(GraphKey{0, *first, {}});
  const CapturedGraph* large = parts_.cache.find(GraphKey{0, budgets.back(), {}});
  auto timed = [](const CapturedGraph* g) {
    return g != nullptr && std::isfinite(g->replay_ms) && g->replay_ms > 0.0;
  };
  if (graph == nullptr || !timed(small) || !timed(large)) return std::nullopt;
  if (parts_.cost.eager_expected_faster(parts_.cache, *graph, tokens)) return std::nullopt;
  // On the line through the smallest and largest graphs' replays, which the
  // cost model times (graphs between take estimates from their warm-ups, a
  // few percent off either way: as large as the gains weighed here). The
  // line charges every replay its fixed cost and every budget its padding;
  // it overestimates the middle budgets, so splits it favours are safe.
  const double slope =
      (large->replay_ms - small->replay_ms) / static_cast<double>(budgets.back() - *first);
  return small->replay_ms + slope * static_cast<double>(*fit - *first);
}

bool BatchExecutor::pipelining(ExecuteMode mode) const {
  const eg_model_info& info = plugin_.info();
  return mode == ExecuteMode::Planned && config_.use_graphs && config_.prefer_faster_path &&
         config_.pipeline_first_batch && backend_->overlaps_staging() && info.num_paths == 1 &&
         info.num_capture_axes == 0 && parts_.cache.captured() && parts_.cost.calibrated();
}

bool BatchExecutor::maybe_split_first_batch(std::vector<PackedBatch>& batches,
                                            const std::vector<int64_t>& tokens,
                                            const std::vector<int64_t>& frames) const {
  if (batches.empty() || !(staging_ms_per_token_ > 0.0)) return false;
  const PackedBatch& first = batches.front();
  if (first.items.size() < 2 || !first.path_budget[0] || *first.path_budget[0] <= 0) return false;
  PipelineSplitInputs in;
  in.staging_ms_per_token = staging_ms_per_token_;
  in.replay_ms = [this](int64_t t) { return replay_ms_for(t); };
  for (int64_t idx : first.items) in.item_tokens.push_back(tokens[static_cast<size_t>(idx)]);
  const int64_t k = pipeline_split_point(in);
  if (k <= 0) return false;
  auto [head, rest] =
      split_packed_batch(first, k, tokens, frames, parts_.cache.packing_budgets().at(0));
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug(
        "'{}': first batch of {} items split {} + {} ({} + {} {}): its staging, {:.4f} ms a "
        "token, overlaps the head's replay",
        plugin_.name(), first.items.size(), head.items.size(), rest.items.size(),
        head.path_tokens[0], rest.path_tokens[0], parts_.plan.path_unit(0), staging_ms_per_token_);
  batches.front() = std::move(head);
  batches.insert(batches.begin() + 1, std::move(rest));
  return true;
}

Result BatchExecutor::execute(const std::vector<const Item*>& items, ExecuteMode mode) {
  collect_eager_feedback();
  const eg_model_info& info = plugin_.info();
  const std::vector<OutputSpec>& specs = plugin_.outputs();
  const size_t n = items.size();
  const int num_paths = info.num_paths;
  const size_t num_outputs = specs.size();
  const BudgetPlan& plan = parts_.plan.budgets();

  std::vector<int64_t> out_tokens(n), frames(n);
  std::vector<std::vector<int64_t>> path_tokens(n, std::vector<int64_t>(num_paths));
  std::vector<std::vector<int64_t>> rows(num_outputs, std::vector<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    if (!items[i] || !items[i]->get())
      throw Error(ErrorKind::Input,
                  "item " + std::to_string(i) + " is empty (moved-from or never made)");
    const eg_item_spec& s = items[i]->spec();
    if (s.output_tokens < 0)
      throw Error(ErrorKind::Input, "item " + std::to_string(i) + " has negative output tokens");
    if (s.frames < 0)
      throw Error(ErrorKind::Input, "item " + std::to_string(i) + " of plugin '" + plugin_.name() +
                                        "' has negative frames (" + std::to_string(s.frames) + ")");
    out_tokens[i] = s.output_tokens;
    frames[i] = s.frames;
    for (int p = 0; p < num_paths; ++p) {
      path_tokens[i][p] = path_tokens_of(plugin_, s, p);
      if (path_tokens[i][p] < 0)
        throw Error(ErrorKind::Input, "item " + std::to_string(i) + " has negative " +
                                          parts_.plan.path_unit(p) + " on path '" +
                                          parts_.plan.path_name(p) + "'");
    }
    for (size_t o = 0; o < num_outputs; ++o)
      rows[o][i] = specs[o].rows_per_item > 0 ? specs[o].rows_per_item : s.output_tokens;
  }

  // A reference call runs each item alone (its own batch, whatever its frames).
  const bool reference = mode == ExecuteMode::Reference;
  std::vector<PackedBatch> batches =
      pack_items(out_tokens, path_tokens, frames, parts_.cache.packing_budgets(),
                 reference ? 1 : plan.max_batch_size, reference ? 0 : plan.max_frames_per_batch);
  const bool pipelined = pipelining(mode);
  bool split = false;
  if (pipelined) {
    std::vector<int64_t> tokens0(n);
    for (size_t i = 0; i < n; ++i) tokens0[i] = path_tokens[i][0];
    split = maybe_split_first_batch(batches, tokens0, frames);
  }
  // Each batch's items are consecutive in every output: the default
  // post-processing is then one copy per batch and output.
  std::vector<std::vector<int64_t>> offsets(num_outputs, std::vector<int64_t>(n, 0));
  {
    std::vector<int64_t> next(num_outputs, 0);
    for (const PackedBatch& batch : batches)
      for (int64_t idx : batch.items)
        for (size_t o = 0; o < num_outputs; ++o) {
          offsets[o][idx] = next[o];
          next[o] += rows[o][idx];
        }
  }
  Result result(backend_, specs, rows, std::move(offsets));
  if (n == 0) return result;

  std::vector<const eg_item*> batch_items;
  std::vector<const std::vector<int64_t>*> batch_tokens;
  std::vector<eg_tensor> dst;
  std::vector<int64_t> batch_rows(num_outputs);
  std::vector<int64_t> axis_keys(info.num_capture_axes);
  std::vector<const std::vector<eg_tensor>*> path_outputs(num_paths);
  std::vector<PathRun> runs(num_paths);

  for (const PackedBatch& batch : batches) {
    const int64_t bn = static_cast<int64_t>(batch.items.size());
    batch_items.clear();
    batch_tokens.clear();
    dst.assign(num_outputs * batch.items.size(), eg_tensor{});
    std::fill(batch_rows.begin(), batch_rows.end(), 0);
    for (size_t k = 0; k < batch.items.size(); ++k) {
      const int64_t idx = batch.items[k];
      batch_items.push_back(items[idx]->get());
      batch_tokens.push_back(&path_tokens[idx]);
      for (size_t o = 0; o < num_outputs; ++o) {
        dst[o * batch.items.size() + k] = result.item(static_cast<size_t>(idx), o);
        batch_rows[o] += rows[o][idx];
      }
    }
    if (info.num_capture_axes > 0) {
      plugin_.call("select_axis_keys", [&](eg_error* e) {
        return plugin_.api()->select_axis_keys(plugin_.handle(), batch_items.data(), bn,
                                               axis_keys.data(), e);
      });
      if (forced_axis_keys_) axis_keys = *forced_axis_keys_;
      for (int64_t idx : batch.items) result.set_axis_keys(static_cast<size_t>(idx), axis_keys);
    }
    const bool too_many_frames =
        plan.max_frames_per_batch > 0 && batch.frames > plan.max_frames_per_batch;

    for (int p = 0; p < num_paths; ++p) {
      PathRun& run = runs[p];
      run = PathRun{};
      run.tokens = batch.path_tokens[p];
      path_outputs[p] = nullptr;
      if (run.tokens == 0) continue;
      collect_eager_feedback();  // an earlier batch's chosen eager run may have finished
      CapturedGraph* graph = nullptr;
      CapturedGraph* skipped = nullptr;
      if (choose_graph(p, batch, axis_keys, mode, too_many_frames, graph, skipped, run.reason)) {
        // An unsplit first batch measures the staging a request waits for:
        // on an idle stream only (behind queued work the timer would see only
        // what is left exposed), and not a head, whose fixed costs would
        // count against fewer tokens.
        std::unique_ptr<StreamTimer> staging_timer;
        if (pipelined && !split && &batch == &batches.front() &&
            staging_checks_.size() < kMaxEagerChecks && backend_->stream_idle()) {
          try {
            staging_timer = timing_.make_timer({TimedWork::Staging, graph->shape});
          } catch (const std::exception& e) {
            spdlog::debug("'{}': staging goes untimed: {}", plugin_.name(), e.what());
          }
        }
        parts_.cache.replay(*graph, batch_items, staging_timer.get());
        if (staging_timer) staging_checks_.push_back({run.tokens, std::move(staging_timer)});
        path_outputs[p] = &graph->outputs;
        run.replayed = true;
        run.budget = graph->shape.token_budget;
        continue;
      }
      if (spdlog::should_log(spdlog::level::debug))
        spdlog::debug("'{}': {} items, {} {} on path '{}' run eagerly ({})", plugin_.name(), bn,
                      run.tokens, parts_.plan.path_unit(p), parts_.plan.path_name(p),
                      eager_reason_name(run.reason));
      eg_graph_shape shape = parts_.plan.shape(p, run.tokens, axis_keys,
                                               too_many_frames || reference ? batch.frames : 0);
      if (reference) shape.max_batch_size = bn;
      if (skipped == nullptr) {
        path_outputs[p] = &parts_.eager.run(shape, batch_items);
        continue;
      }
      // A choice of the cost model: time it, and let the next batches know
      // when it was wrong. No timer (events exhausted): the run goes untimed.
      EagerCheck check{GraphKey{p, *batch.path_budget[p], axis_keys}, run.tokens, nullptr};
      try {
        check.timer = timing_.make_timer({TimedWork::EagerRun, shape});
      } catch (const std::exception& e) {
        spdlog::debug("'{}': an eager run goes untimed: {}", plugin_.name(), e.what());
      }
      path_outputs[p] = &parts_.eager.run(shape, batch_items, check.timer.get());
      if (!check.timer) continue;
      // Bounded: a timer whose events never complete must not pile up.
      if (eager_checks_.size() >= kMaxEagerChecks) eager_checks_.erase(eager_checks_.begin());
      eager_checks_.push_back(std::move(check));
    }
    parts_.postprocess.write(path_outputs, batch_items, dst, batch_rows);
    parts_.stats.record_batch(runs, batch_tokens);
  }
  parts_.stats.maybe_log();
  // Copies out and waits then concern this call alone, not calls queued after it.
  result.mark_written();
  return result;
}

}  // namespace encgraph
