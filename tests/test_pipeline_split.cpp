// pipeline_split_point: when splitting a request's first batch into a head and
// the rest pays (the rest's staging overlapping the head's replay).
#include "manager/pipeline_split.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using encgraph::pipeline_split_point;
using encgraph::PipelineSplitInputs;

namespace {

// Replays cost `fixed` plus `per_token` a token, for budgets in steps of `step`.
PipelineSplitInputs inputs(int items, int64_t tokens_each, double fixed, double per_token,
                           int64_t step, double staging_per_token) {
  PipelineSplitInputs in;
  in.item_tokens.assign(static_cast<size_t>(items), tokens_each);
  in.staging_ms_per_token = staging_per_token;
  in.replay_ms = [=](int64_t tokens) -> std::optional<double> {
    const int64_t budget = (tokens + step - 1) / step * step;
    return fixed + per_token * static_cast<double>(budget);
  };
  return in;
}

// The modelled time of the batch with a head of k items (k = 0: unsplit).
double modelled_ms(const PipelineSplitInputs& in, int64_t k) {
  const int64_t total = std::accumulate(in.item_tokens.begin(), in.item_tokens.end(), int64_t{0});
  const double h = in.staging_ms_per_token;
  if (k == 0) return h * static_cast<double>(total) + *in.replay_ms(total);
  const int64_t head =
      std::accumulate(in.item_tokens.begin(), in.item_tokens.begin() + k, int64_t{0});
  const int64_t rest = total - head;
  return h * static_cast<double>(head) +
         std::max(*in.replay_ms(head), h * static_cast<double>(rest)) + *in.replay_ms(rest);
}

}  // namespace

TEST_CASE("a large first batch with costly staging is split into a small head and the rest") {
  // 16 videos of 768 tokens: replays linear in the budget (~106 ms for the
  // whole batch), staging 6 ms for the whole batch (the H200 figures).
  const PipelineSplitInputs in = inputs(16, 768, 0.5, 106.0 / 12288, 1024, 6.0 / 12288);
  const int64_t k = pipeline_split_point(in);
  REQUIRE(k > 0);
  CHECK(k < 16);
  // The head is small: its staging is what stays exposed.
  CHECK(k <= 4);
  // The pick is the best head, and it saves what the model says.
  for (int64_t j = 1; j < 16; ++j) CHECK(modelled_ms(in, k) <= modelled_ms(in, j) + 1e-9);
  CHECK(modelled_ms(in, k) < modelled_ms(in, 0) * 0.98);
  CHECK(modelled_ms(in, 0) - modelled_ms(in, k) > 3.0);
}

TEST_CASE("no split where a second replay costs more than the staging it hides") {
  // 16 small images: each replay has a fixed cost of 5 ms, staging is 0.5 ms.
  const PipelineSplitInputs in = inputs(16, 64, 5.0, 0.004, 64, 0.5 / 1024);
  CHECK(pipeline_split_point(in) == 0);
}

TEST_CASE("no split for a gain under the minimum share") {
  // Staging far longer than the replays: a split hides only a replay's worth.
  PipelineSplitInputs in = inputs(8, 100, 0.0, 0.001, 100, 1.0);
  CHECK(pipeline_split_point(in) == 0);
  in.min_gain = 0.0;  // the same inputs with any gain accepted do split
  CHECK(pipeline_split_point(in) > 0);
}

TEST_CASE("no split without a staging measurement, a second item or a graph for the parts") {
  PipelineSplitInputs in = inputs(16, 768, 0.5, 106.0 / 12288, 1024, 6.0 / 12288);
  REQUIRE(pipeline_split_point(in) > 0);

  PipelineSplitInputs unmeasured = in;
  unmeasured.staging_ms_per_token = 0.0;
  CHECK(pipeline_split_point(unmeasured) == 0);

  PipelineSplitInputs one = in;
  one.item_tokens = {768};
  CHECK(pipeline_split_point(one) == 0);

  // Only the whole batch's budget has a graph: no part can replay.
  PipelineSplitInputs whole_only = in;
  whole_only.replay_ms = [](int64_t tokens) -> std::optional<double> {
    if (tokens == 16 * 768) return 106.0;
    return std::nullopt;
  };
  CHECK(pipeline_split_point(whole_only) == 0);

  // No graph for the whole batch (it runs eagerly): nothing to split.
  PipelineSplitInputs no_graph = in;
  no_graph.replay_ms = [](int64_t tokens) -> std::optional<double> {
    if (tokens == 16 * 768) return std::nullopt;
    return 0.5 + 106.0 / 12288 * static_cast<double>(tokens);
  };
  CHECK(pipeline_split_point(no_graph) == 0);

  // Only some heads have graphs: the pick is one of them.
  PipelineSplitInputs some = in;
  some.replay_ms = [](int64_t tokens) -> std::optional<double> {
    if (tokens % (4 * 768) != 0) return std::nullopt;
    return 0.5 + 106.0 / 12288 * static_cast<double>(tokens);
  };
  const int64_t k = pipeline_split_point(some);
  CHECK(k > 0);
  CHECK(k % 4 == 0);
}

TEST_CASE(
    "split_packed_batch: the head and the rest keep their items, tokens, frames and budgets") {
  encgraph::PackedBatch batch;
  batch.items = {4, 1, 3, 0};  // original indices, in packing order
  batch.path_tokens = {10 + 20 + 30 + 40};
  batch.frames = 2 + 1 + 1 + 4;
  batch.path_budget = {std::optional<int64_t>(128)};
  const std::vector<int64_t> tokens = {40, 20, 0, 30, 10};  // by original index
  const std::vector<int64_t> frames = {4, 1, 0, 1, 2};
  const std::vector<int64_t> budgets = {16, 32, 64, 128};

  auto [head, rest] = encgraph::split_packed_batch(batch, 2, tokens, frames, budgets);
  CHECK(head.items == std::vector<int64_t>{4, 1});
  CHECK(rest.items == std::vector<int64_t>{3, 0});
  CHECK(head.path_tokens == std::vector<int64_t>{30});
  CHECK(rest.path_tokens == std::vector<int64_t>{70});
  CHECK(head.frames == 3);
  CHECK(rest.frames == 5);
  REQUIRE(head.path_budget.size() == 1);
  REQUIRE(rest.path_budget.size() == 1);
  CHECK(head.path_budget[0] == std::optional<int64_t>(32));
  CHECK(rest.path_budget[0] == std::optional<int64_t>(128));

  // A part no budget holds gets none (it then runs eagerly).
  auto [small_head, big_rest] = encgraph::split_packed_batch(batch, 1, tokens, frames, {16, 64});
  CHECK(small_head.path_budget[0] == std::optional<int64_t>(16));
  CHECK_FALSE(big_rest.path_budget[0].has_value());
}
