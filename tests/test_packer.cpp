// Packing: stable sort by output tokens, greedy under max items, each path's
// largest budget and max frames per batch, smallest fitting budget per path, 0
// for an empty path, an item with too many frames alone.
#include <encgraph/packer.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

using namespace encgraph;
using V = std::vector<int64_t>;

namespace {
std::vector<V> one_path(const V& t) {
  std::vector<V> out;
  for (auto x : t) out.push_back({x});
  return out;
}
V ones(size_t n) {
  return V(n, 1);
}
}  // namespace

TEST_CASE("items are sorted by output tokens and packed greedily") {
  const V tokens{300, 50, 200, 50, 100};
  const auto batches = pack_items(tokens, one_path(tokens), ones(5), {{128, 256, 512}}, 3, 0);
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].items == V{1, 3, 4});  // 50, 50, 100 (stable among equals)
  CHECK(batches[0].path_tokens == V{200});
  CHECK(*batches[0].path_budget[0] == 256);
  CHECK(batches[1].items == V{2, 0});  // 200 + 300 = 500 <= 512
  CHECK(*batches[1].path_budget[0] == 512);
}

TEST_CASE("an item larger than every budget gets its own batch and no budget") {
  const V tokens{10, 5000, 20};
  const auto batches = pack_items(tokens, one_path(tokens), ones(3), {{64, 128}}, 8, 0);
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].items == V{0, 2});
  CHECK(batches[1].items == V{1});
  CHECK_FALSE(batches[1].path_budget[0].has_value());
}

TEST_CASE("two paths: each path's largest budget bounds the batch; empty path gets 0") {
  // item: {global, local}
  const std::vector<V> per_path{{1, 0}, {1, 0}, {1, 300}, {1, 300}};
  const V out{1, 1, 301, 301};
  const auto batches = pack_items(out, per_path, ones(4), {{4, 8}, {0, 256, 512}}, 8, 0);
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].items == V{0, 1, 2});
  CHECK(*batches[0].path_budget[0] == 4);
  CHECK(*batches[0].path_budget[1] == 512);
  CHECK(batches[1].items == V{3});
  CHECK(*batches[1].path_budget[1] == 512);

  const auto only_global = pack_items({1, 1}, {{1, 0}, {1, 0}}, ones(2), {{4, 8}, {0, 256}}, 8, 0);
  REQUIRE(only_global.size() == 1);
  CHECK(*only_global[0].path_budget[1] == 0);
}

TEST_CASE("random mixes: every item exactly once, limits respected, budgets minimal") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    V tokens(n);
    for (auto& t : tokens) t = 1 + rng() % 700;
    const V budgets{64, 128, 256, 512};
    const int64_t max_items = 1 + rng() % 8;
    const auto batches = pack_items(tokens, one_path(tokens), ones(n), {budgets}, max_items, 0);
    V seen;
    for (const auto& b : batches) {
      CHECK(static_cast<int64_t>(b.items.size()) <= max_items);
      int64_t sum = 0;
      for (auto i : b.items) sum += tokens[i];
      CHECK(sum == b.path_tokens[0]);
      if (b.items.size() > 1) CHECK(sum <= 512);
      if (b.path_budget[0]) {
        CHECK(*b.path_budget[0] >= sum);
        auto it = std::find(budgets.begin(), budgets.end(), *b.path_budget[0]);
        REQUIRE(it != budgets.end());
        if (it != budgets.begin()) CHECK(*(it - 1) < sum);
      } else {
        CHECK(sum > 512);
      }
      seen.insert(seen.end(), b.items.begin(), b.items.end());
    }
    std::sort(seen.begin(), seen.end());
    V all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    CHECK(seen == all);
  }
}

TEST_CASE("frames bound a batch like items and tokens; frames are summed") {
  // Six 3-frame videos of 10 tokens: 8 items and 512 tokens would fit, 7 frames
  // hold two videos per batch.
  const V tokens(6, 10);
  const auto batches = pack_items(tokens, one_path(tokens), V(6, 3), {{64, 512}}, 8, 7);
  REQUIRE(batches.size() == 3);
  for (const auto& b : batches) {
    CHECK(b.items.size() == 2);
    CHECK(b.frames == 6);
    CHECK(*b.path_budget[0] == 64);
  }
  // Unbounded (0): one batch of all six.
  const auto unbounded = pack_items(tokens, one_path(tokens), V(6, 3), {{64, 512}}, 8, 0);
  REQUIRE(unbounded.size() == 1);
  CHECK(unbounded[0].frames == 18);
}

TEST_CASE("an item with more frames than a batch may hold is packed alone") {
  // Item 1 (9 frames) exceeds 8; the items around it keep packing together.
  const V tokens{5, 6, 7, 8};
  const V frames{1, 9, 1, 1};
  const auto batches = pack_items(tokens, one_path(tokens), frames, {{64}}, 8, 8);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].items == V{0});
  CHECK(batches[1].items == V{1});
  CHECK(batches[1].frames == 9);
  CHECK(*batches[1].path_budget[0] == 64);  // the manager runs it eagerly for its frames
  CHECK(batches[2].items == V{2, 3});
  CHECK(batches[2].frames == 2);
}

TEST_CASE("random mixes with frames: the frame bound holds for every batch of several items") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    V tokens(n), frames(n);
    for (auto& t : tokens) t = 1 + rng() % 300;
    for (auto& f : frames) f = 1 + rng() % 12;
    const int64_t max_frames = 1 + rng() % 16;
    const auto batches = pack_items(tokens, one_path(tokens), frames, {{512}}, 8, max_frames);
    size_t seen = 0;
    for (const auto& b : batches) {
      int64_t sum = 0;
      for (auto i : b.items) sum += frames[i];
      CHECK(sum == b.frames);
      if (b.items.size() > 1) CHECK(sum <= max_frames);
      if (sum > max_frames) CHECK(b.items.size() == 1);
      seen += b.items.size();
    }
    CHECK(seen == static_cast<size_t>(n));
  }
}
