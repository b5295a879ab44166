// The plugin's processor and layout against the released rules: smart_resize
// sizes, the patch flattening order, resizing, and the window and capacity
// bookkeeping of a batch (frames bounded by max_frames_per_batch).
#include "layout.hpp"
#include "qwen_reference.hpp"
#include "spec.hpp"

#include <encoder_kit/error.hpp>
#include <encoder_kit/image_resize.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace {

qwen_vl::Options tiny_options() {
  qwen_vl::Options o(qwen_vl::kQwen2_5Vl);
  qwen_vl::VisionConfig& m = o.model;
  m.depth = 4;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.intermediate_size = 96;
  m.out_hidden_size = 48;
  m.window_size = 56;
  m.fullatt_block_indexes = {2};
  return o;
}

}  // namespace

TEST_CASE("smart_resize follows the released processor's rule") {
  // Expected values computed with the processor's Python smart_resize.
  struct Case {
    int64_t h, w, min_pixels, max_pixels, out_h, out_w;
  };
  const Case cases[] = {
      {224, 224, 3136, 12845056, 224, 224},     {500, 375, 3136, 12845056, 504, 364},
      {1080, 1920, 3136, 12845056, 1092, 1932}, {4000, 3000, 3136, 12845056, 4004, 2996},
      {4000, 3000, 3136, 1003520, 1148, 840},   {1080, 1920, 3136, 1003520, 728, 1316},
      {30, 40, 3136, 12845056, 56, 84},         {42, 70, 3136, 12845056, 56, 56},
      {70, 42, 3136, 12845056, 56, 56},         {98, 98, 3136, 12845056, 112, 112},
      {10, 1000, 3136, 12845056, 28, 560},      {14, 2800, 3136, 12845056, 28, 812},
      {7, 9, 3136, 12845056, 56, 84},           {1, 1, 3136, 12845056, 56, 56},
      {333, 777, 200704, 401408, 336, 784},     {28, 5600, 3136, 200704, 28, 5600},
  };
  for (const Case& c : cases) {
    CAPTURE(c.h);
    CAPTURE(c.w);
    const auto [h, w] = qwen_vl::smart_resize(c.h, c.w, 28, c.min_pixels, c.max_pixels);
    CHECK(h == c.out_h);
    CHECK(w == c.out_w);
  }
  CHECK_THROWS_AS(qwen_vl::smart_resize(10, 2001, 28, 3136, 12845056), encoder_kit::Error);
}

TEST_CASE("patch rows follow the processor's flattening order, time padding included") {
  const qwen_vl::Options o = tiny_options();
  qwen_ref::Config rc;
  for (auto [frames, h, w] :
       {std::tuple{1, 56, 84}, std::tuple{3, 84, 56}, std::tuple{4, 56, 56}}) {
    const auto px = qwen_ref::random_pixels(frames, h, w, 11 + frames);
    const auto ours = qwen_vl::patch_rows_from_pixels(o, frames > 1, px.data(), frames, h, w, 3);
    const qwen_ref::Input ref = qwen_ref::preprocess(rc, px, frames, h, w);
    REQUIRE(ours.size() == ref.rows.size());
    double worst = 0;
    for (size_t i = 0; i < ours.size(); ++i)
      worst = std::max(worst, std::abs(ours[i] - ref.rows[i]));
    CHECK(worst < 1e-6);
    const qwen_vl::Grid g = qwen_vl::grid_for(o, frames > 1, h, w, frames);
    CHECK(g.t == ref.t);
    CHECK(g.h == ref.h);
    CHECK(g.w == ref.w);
  }
}

TEST_CASE("grey and RGBA pixels are read as RGB") {
  const qwen_vl::Options o = tiny_options();
  std::vector<uint8_t> grey(56 * 56), rgb(56 * 56 * 3), rgba(56 * 56 * 4);
  for (size_t i = 0; i < grey.size(); ++i) {
    grey[i] = static_cast<uint8_t>(i * 7);
    for (int c = 0; c < 3; ++c) rgb[i * 3 + c] = grey[i];
    for (int c = 0; c < 3; ++c) rgba[i * 4 + c] = grey[i];
    rgba[i * 4 + 3] = 17;
  }
  const auto a = qwen_vl::patch_rows_from_pixels(o, /*video=*/false, rgb.data(), 1, 56, 56, 3);
  CHECK(qwen_vl::patch_rows_from_pixels(o, /*video=*/false, grey.data(), 1, 56, 56, 1) == a);
  CHECK(qwen_vl::patch_rows_from_pixels(o, /*video=*/false, rgba.data(), 1, 56, 56, 4) == a);
  CHECK_THROWS_AS(qwen_vl::patch_rows_from_pixels(o, /*video=*/false, rgb.data(), 1, 56, 56, 2),
                  encoder_kit::Error);
}

TEST_CASE("resizing keeps flat images flat and same-size images unchanged") {
  std::vector<uint8_t> flat(37 * 53 * 3, 200);
  for (auto [oh, ow] : {std::pair{28, 56}, std::pair{84, 112}, std::pair{37, 20}}) {
    const auto out = encoder_kit::image::resize(flat.data(), 37, 53, 3, oh, ow,
                                                encoder_kit::image::Filter::Bicubic);
    REQUIRE(out.size() == static_cast<size_t>(oh * ow * 3));
    for (uint8_t v : out) CHECK(v == 200);
  }
  // A ramp shrunk by 2 averages neighbouring pairs (the filter widens when shrinking).
  std::vector<uint8_t> ramp(1 * 64);
  for (int x = 0; x < 64; ++x) ramp[x] = static_cast<uint8_t>(x * 4);
  const auto half = encoder_kit::image::resize(ramp.data(), 1, 64, 1, 1, 32,
                                               encoder_kit::image::Filter::Bilinear);
  for (int x = 1; x < 31; ++x) CHECK(std::abs(int(half[x]) - (8 * x + 2)) <= 1);
  // An item whose size is not a multiple of 28 is resized to the processor's size.
  const qwen_vl::Options o = tiny_options();
  std::vector<uint8_t> img(50 * 100 * 3, 128);
  const auto rows = qwen_vl::patch_rows_from_pixels(o, /*video=*/false, img.data(), 1, 50, 100, 3);
  const qwen_vl::Grid g = qwen_vl::grid_for(o, false, 50, 100, 1);  // resized to 56 x 112
  CHECK(g.h == 4);
  CHECK(g.w == 8);
  CHECK(rows.size() == static_cast<size_t>(g.patches() * o.model.patch_dim()));
}

TEST_CASE("the window layout groups units window by window and inverts exactly") {
  qwen_vl::Options o = tiny_options();  // windows of 2x2 units
  const qwen_vl::Grid g{2, 6, 10};      // 2 frames of 3x5 units
  const qwen_vl::WindowLayout l = qwen_vl::window_layout(o.model, g);
  // Per frame: windows (rows 0-1 | 2) x (cols 0-1 | 2-3 | 4): 4+4+2, 2+2+1 units.
  const std::vector<int32_t> per_frame = {16, 16, 8, 8, 8, 4};
  std::vector<int32_t> expect = per_frame;
  expect.insert(expect.end(), per_frame.begin(), per_frame.end());
  CHECK(l.window_patches == expect);
  CHECK(l.unit_order[0] == 0);
  CHECK(l.unit_order[1] == 1);
  CHECK(l.unit_order[2] == 5);
  CHECK(l.unit_order[3] == 6);
  CHECK(l.unit_order[4] == 2);
  CHECK(l.unit_order[15] == 15);  // frame 1 starts after frame 0's 15 units
  for (size_t u = 0; u < l.inverse.size(); ++u) CHECK(l.unit_order[l.inverse[u]] == int32_t(u));
}

TEST_CASE("window and frame capacities bound every batch that fits the budget") {
  qwen_vl::Options o(qwen_vl::kQwen2_5Vl);  // the released tower: windows of 4x4 units
  std::mt19937_64 rng(3);
  for (int64_t budget : {64, 256, 1024}) {
    eg_graph_shape shape{};
    shape.token_budget = budget;
    shape.max_batch_size = 64;
    const qwen_vl::Capacity cap = qwen_vl::capacity_for(o, shape);
    CHECK(cap.windows < budget / 2);  // far below one window per token
    for (int trial = 0; trial < 200; ++trial) {
      int64_t tokens = 0, frames = 0, windows = 0, items = 0;
      while (items < shape.max_batch_size) {
        // Thin strips are the worst case for windows per token.
        const int64_t h = 28 * (1 + static_cast<int64_t>(rng() % (trial % 3 ? 3 : 20)));
        const int64_t w = 28 * (1 + static_cast<int64_t>(rng() % 24));
        const int64_t f = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 6) : 1;
        const qwen_vl::Grid g = qwen_vl::grid_for(o, f > 1, h, w, f);
        const int64_t t = g.patches() / 4;
        if (tokens + t > budget) break;
        tokens += t;
        frames += g.t;
        windows += static_cast<int64_t>(qwen_vl::window_layout(o.model, g).window_patches.size());
        ++items;
      }
      CHECK(frames <= cap.frames);
      CHECK(windows <= cap.windows);
    }
  }
}

TEST_CASE("max_frames_per_batch bounds the frame table; every batch within it fits") {
  qwen_vl::Options o(qwen_vl::kQwen2_5Vl);  // the released tower: temporal patches of 2 frames
  o.max_frames_per_video = 64;
  std::mt19937_64 rng(5);
  for (int64_t frames_per_batch : {1, 2, 5, 8, 17}) {
    CAPTURE(frames_per_batch);
    eg_graph_shape shape{};
    shape.token_budget = 4096;
    shape.max_batch_size = 16;
    const int64_t unbounded = qwen_vl::capacity_for(o, shape).frames;
    shape.max_frames_per_batch = frames_per_batch;
    const qwen_vl::Capacity cap = qwen_vl::capacity_for(o, shape);
    // n items of f_i >= 1 frames: at most (F + n) / 2 temporal sequences.
    CHECK(cap.frames == (frames_per_batch + std::min<int64_t>(16, frames_per_batch)) / 2);
    CHECK(cap.frames < unbounded);
    for (int trial = 0; trial < 300; ++trial) {
      int64_t tokens = 0, frames = 0, sequences = 0, items = 0;
      while (items < shape.max_batch_size) {  // many short videos and images
        const int64_t f = 1 + static_cast<int64_t>(rng() % 4);
        const qwen_vl::Grid g = qwen_vl::grid_for(o, f > 1, 56, 56, f);
        if (frames + f > frames_per_batch || tokens + g.patches() / 4 > shape.token_budget) break;
        frames += f;
        tokens += g.patches() / 4;
        sequences += g.t;
        ++items;
      }
      CHECK(sequences <= cap.frames);
    }
  }
}

TEST_CASE("a staged batch concatenates items and offsets their tables") {
  qwen_vl::Options o = tiny_options();
  const auto a = qwen_vl::make_item_data(o, {1, 4, 6}, 1, {});
  const auto b = qwen_vl::make_item_data(o, {2, 4, 4}, 3, {});
  eg_graph_shape shape{};
  shape.token_budget = 32;
  shape.max_batch_size = 4;
  const qwen_vl::Capacity cap = qwen_vl::capacity_for(o, shape);
  std::vector<float> px(cap.patches * o.model.patch_dim()), cs(cap.patches * 8), sn(cs.size());
  std::vector<int32_t> cuf(cap.frames + 1), cuw(cap.windows + 1), inv(cap.tokens);
  qwen_vl::StagingTarget t{px.data(),  cs.data(),  sn.data(), cuf.data(),
                           cuw.data(), inv.data(), cap};
  const qwen_vl::StagedRows r = qwen_vl::stage_batch(o, {&a, &b}, t);
  CHECK(r.tokens == 6 + 8);
  CHECK(r.patches == 24 + 32);
  CHECK(r.frame_rows == 4);
  CHECK(std::vector<int32_t>(cuf.begin(), cuf.begin() + 4) == std::vector<int32_t>{0, 24, 40, 56});
  CHECK(r.window_rows == 1 + 2 + 2);
  CHECK(std::vector<int32_t>(cuw.begin(), cuw.begin() + 5) ==
        std::vector<int32_t>{0, 16, 24, 40, 56});
  CHECK(inv[6] == 6);  // b's first token: the first unit after a's six
  // Too many items for the budget is an error, not an overflow.
  const auto big = qwen_vl::make_item_data(o, {1, 8, 8}, 1, {});
  CHECK_THROWS_AS(qwen_vl::stage_batch(o, {&big, &big, &a}, t), encoder_kit::Error);
}

TEST_CASE("frames are laid out longest first, tokens stay in batch order") {
  qwen_vl::Options o = tiny_options();
  const auto small = qwen_vl::make_item_data(o, {1, 4, 4}, 1, {});  // 4 tokens, 16 patches
  const auto large = qwen_vl::make_item_data(o, {1, 6, 8}, 1, {});  // 12 tokens, 48 patches
  eg_graph_shape shape{};
  shape.token_budget = 32;
  shape.max_batch_size = 4;
  const qwen_vl::Capacity cap = qwen_vl::capacity_for(o, shape);
  std::vector<float> px(cap.patches * o.model.patch_dim()), cs(cap.patches * 8), sn(cs.size());
  std::vector<int32_t> cuf(cap.frames + 1), cuw(cap.windows + 1), inv(cap.tokens);
  qwen_vl::StagingTarget t{px.data(),  cs.data(),  sn.data(), cuf.data(),
                           cuw.data(), inv.data(), cap};
  qwen_vl::stage_batch(o, {&small, &large}, t);
  CHECK(std::vector<int32_t>(cuf.begin(), cuf.begin() + 3) == std::vector<int32_t>{0, 48, 64});
  // Output token 0 is the small item's first: its rows follow the large item's 12 units.
  CHECK(inv[0] == 12 + small.inverse[0]);
  CHECK(inv[4] == large.inverse[0]);
}

TEST_CASE("full-attention buckets cover every sequence a budget can hold") {
  qwen_vl::Options o(qwen_vl::kQwen2_5Vl);
  std::mt19937_64 rng(9);
  for (int64_t budget : {64, 300, 4096}) {
    eg_graph_shape shape{};
    shape.token_budget = budget;
    shape.max_batch_size = 128;
    const qwen_vl::Capacity cap = qwen_vl::capacity_for(o, shape);
    // Unmerged, and with small launches merged as the plugin runs them.
    for (const int64_t merge : {int64_t{0}, encoder_kit::kBucketMergeUnits}) {
      CAPTURE(merge);
      const auto buckets = qwen_vl::full_attention_buckets(cap, merge);
      int64_t covered = 0, blocks = 0;
      for (const auto& b : buckets) {
        CHECK(b.first == covered);
        covered += b.count;
        blocks += b.count * ((b.max_seqlen + 63) / 64);
      }
      CHECK(covered <= cap.frames);
      // Far fewer attention blocks than a rectangular frames x longest-frame grid
      // (merging adds at most `merge` a launch).
      CHECK(blocks * 4 < cap.frames * ((cap.max_frame_patches + 63) / 64) + 64 +
                             4 * merge * static_cast<int64_t>(buckets.size()));
      for (int trial = 0; trial < 100; ++trial) {
        std::vector<int64_t> lengths;  // patches per frame, longest first
        int64_t left = budget;
        while (left >= 4) {
          const int64_t units =
              4 +
              static_cast<int64_t>(rng() % static_cast<uint64_t>(std::min<int64_t>(left - 3, 200)));
          lengths.push_back(std::min(units, left) * 4);
          left -= std::min(units, left);
        }
        std::sort(lengths.rbegin(), lengths.rend());
        REQUIRE(static_cast<int64_t>(lengths.size()) <= cap.frames);
        for (const auto& b : buckets)
          for (int64_t i = b.first; i < b.first + b.count && i < int64_t(lengths.size()); ++i)
            CHECK(lengths[i] <= b.max_seqlen);
        CHECK(static_cast<int64_t>(lengths.size()) <= covered);
      }
    }
  }
}
