// The glm4v plugin's configuration and processor rules: Glm4vImageProcessor's
// resize (the video rule over an image's two temporal copies, with its pixel
// bounds from transformers' defaults), Glm4vVideoProcessor's, a released-size
// config.json, and the bicubic position taps.
#include "config.hpp"
#include "layout.hpp"
#include "spec.hpp"
#include "weights.hpp"
#include "work.hpp"

#include "../plugin_test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace {

qwen_vl::Options parse(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  return qwen_vl::parse_options(qwen_vl::kGlm4v, &p);
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  REQUIRE(out.good());
}

}  // namespace

TEST_CASE("images resize as Glm4vImageProcessor resizes them") {
  const qwen_vl::Options o = parse({});
  CHECK(o.min_pixels == 112 * 112);
  CHECK(o.max_pixels == 28 * 28 * 15000);
  // (height, width) -> resized, from transformers' smart_resize(num_frames =
  // temporal_patch_size, factor = 28) at the processor's default size.
  struct Case {
    int64_t h, w, rh, rw;
  };
  const std::vector<Case> cases = {
      {480, 640, 476, 644},  // rounded to multiples of 28
      {1080, 1920, 1092, 1932},
      {4000, 6000, 1960, 2968},  // over longest_edge (both copies counted): floor
      {20, 30, 84, 112},         // a side under 28 scaled up first, then under shortest_edge: ceil
      {10, 500, 28, 1400},
      {42, 70, 84, 112},  // 1.5 and 2.5 round half to even (2, 2), then under shortest_edge
      {100, 100, 112, 112},
      {3000, 200, 2996, 196},
  };
  for (const Case& c : cases) {
    CAPTURE(c.h);
    CAPTURE(c.w);
    const qwen_vl::Grid g = qwen_vl::grid_for(o, false, c.h, c.w, 1);
    CHECK(g.t == 1);
    CHECK(g.h * 14 == c.rh);
    CHECK(g.w * 14 == c.rw);
  }
  // The released GLM-4.1V folders' longest_edge is smaller; a key sets it as
  // preprocessor_config.json would.
  const qwen_vl::Options released = parse({{"max_pixels", "9633792"}});
  const qwen_vl::Grid g = qwen_vl::grid_for(released, false, 4000, 6000, 1);
  CHECK(g.h * 14 == 1792);
  CHECK(g.w * 14 == 2688);
  // Budgets count an image's tokens at max_pixels over its two copies.
  CHECK(released.max_budget == 9633792 / (28 * 28 * 2));
}

TEST_CASE("videos resize as Glm4vVideoProcessor resizes them") {
  const qwen_vl::Options o = parse({});
  CHECK(o.video_max_pixels == 28 * 28 * 2 * 30000);
  struct Case {
    int64_t t, h, w, rh, rw, gt;
  };
  const std::vector<Case> cases = {
      {16, 720, 1280, 728, 1288, 8},
      {3, 480, 640, 476, 644, 2},  // time padded to 4 frames
      {300, 1080, 1920, 280, 504, 150},
  };
  for (const Case& c : cases) {
    CAPTURE(c.t);
    const qwen_vl::Grid g = qwen_vl::grid_for(o, true, c.h, c.w, c.t);
    CHECK(g.t == c.gt);
    CHECK(g.h * 14 == c.rh);
    CHECK(g.w * 14 == c.rw);
  }
  CHECK_THROWS(qwen_vl::grid_for(o, true, 480, 640, 1));
}

TEST_CASE("GLM-4.1V-9B's config.json gives its tower; a wrong model or activation is refused") {
  encgraph::test::TempDir dir("glm4v-config");
  const auto file = dir.path() / "config.json";
  // The released GLM-4.1V-9B-Thinking vision_config's sizes.
  write_text(file, R"({"model_type": "glm4v", "vision_config": {"model_type": "glm4v",
      "depth": 24, "hidden_size": 1536, "num_heads": 12, "intermediate_size": 13696,
      "out_hidden_size": 4096, "patch_size": 14, "temporal_patch_size": 2,
      "spatial_merge_size": 2, "in_channels": 3, "image_size": 336, "attention_bias": false,
      "rms_norm_eps": 1e-05, "hidden_act": "silu"}})");
  const qwen_vl::Options o = parse({{"config_json", file.string()}});
  const qwen_vl::VisionConfig& c = o.model;
  CHECK(c.depth == 24);
  CHECK(c.head_dim() == 128);
  CHECK(c.pos_grid() == 24);
  CHECK(c.mlp_width() == 4096);  // the blocks' MLP is out_hidden_size wide
  CHECK(c.intermediate_size == 13696);
  CHECK_FALSE(c.attention_bias);
  CHECK(c.norm_eps == doctest::Approx(1e-5));
  CHECK(qwen_vl::parameter_count(c) > 500'000'000);
  CHECK(c.resize_factor() == 28);

  write_text(file, R"({"model_type": "qwen2_vl", "vision_config": {"depth": 2}})");
  CHECK(encgraph::test::message_of([&] {
          parse({{"config_json", file.string()}});
        }).find("model_type 'qwen2_vl'") != std::string::npos);
  write_text(file, R"({"model_type": "glm4v", "vision_config": {"hidden_act": "gelu"}})");
  CHECK(encgraph::test::message_of([&] {
          parse({{"config_json", file.string()}});
        }).find("hidden_act is 'gelu'") != std::string::npos);
  write_text(file, R"({"model_type": "glm4v", "vision_config": {"image_size": 10}})");
  CHECK(encgraph::test::message_of([&] {
          parse({{"config_json", file.string()}});
        }).find("image_size 10") != std::string::npos);
}

TEST_CASE("bicubic taps: weights sum to one, centre samples hit table rows") {
  qwen_vl::VisionConfig c(qwen_vl::kGlm4v);
  c.num_position_embeddings = 25;  // a 5 x 5 table
  CHECK(qwen_vl::pos_taps(qwen_vl::kGlm4v) == 16);
  for (const qwen_vl::Grid g : {qwen_vl::Grid{1, 4, 6}, qwen_vl::Grid{2, 10, 10}}) {
    std::vector<int32_t> order(static_cast<size_t>(g.patches() / 4));
    std::iota(order.begin(), order.end(), 0);
    std::vector<int32_t> index(static_cast<size_t>(g.patches() * 16));
    std::vector<float> weight(index.size());
    qwen_vl::pos_embed_tables(c, g, order, index.data(), weight.data());
    for (int64_t r = 0; r < g.patches(); ++r) {
      float sum = 0;
      for (int64_t k = 0; k < 16; ++k) {
        CHECK(index[static_cast<size_t>(r * 16 + k)] >= 0);
        CHECK(index[static_cast<size_t>(r * 16 + k)] < 25);
        sum += weight[static_cast<size_t>(r * 16 + k)];
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    }
  }
  // A 10 x 10 grid over a 5 x 5 table: patch (0, 0) samples at (-0.25,
  // -0.25); the nearest table row (0) outweighs all others.
  qwen_vl::Grid g{1, 10, 10};
  std::vector<int32_t> order(25);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int32_t> index(100 * 16);
  std::vector<float> weight(index.size());
  qwen_vl::pos_embed_tables(c, g, order, index.data(), weight.data());
  float at_zero = 0;
  for (int k = 0; k < 16; ++k)
    if (index[static_cast<size_t>(k)] == 0) at_zero += weight[static_cast<size_t>(k)];
  CHECK(at_zero > 0.9f);
}

TEST_CASE("the work estimate counts GLM-4.1V's products: MLP out_hidden_size wide, its merger") {
  const qwen_vl::VisionConfig c(qwen_vl::kGlm4v);  // the 9B tower
  for (const qwen_vl::Grid g : {qwen_vl::Grid{1, 16, 16}, qwen_vl::Grid{3, 24, 34}}) {
    CAPTURE(g.h);
    // By hand in float64 (2 FLOPs per multiply-add): patch embedding; per block
    // q/k/v, proj, gate, up, down (4096 wide) and 4 d len^2 per temporal patch;
    // downsample, merger proj, gate, up (13696 wide) and down per token.
    const double d = 1536, mlp = 4096, out = 4096, wide = 13696;
    const double p = static_cast<double>(g.patches()), frame = static_cast<double>(g.h * g.w);
    double f = 2 * p * 3 * 2 * 14 * 14 * d;
    f += 24 * (p * 2 * (3 * d * d + d * d + 3 * d * mlp) +
               4 * d * static_cast<double>(g.t) * frame * frame);
    f += 2 * (p / 4) * (4 * d * out + out * out + 3 * out * wide);
    CHECK(static_cast<double>(qwen_vl::item_flops(c, g).value()) ==
          doctest::Approx(f).epsilon(1e-12));
  }
}
