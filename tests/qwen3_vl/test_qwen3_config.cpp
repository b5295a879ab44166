// The qwen3_vl plugin's configuration and processor rules: every released
// size's config.json (tests/qwen3_vl/fixtures, their vision_config values)
// loads with its own dimensions; the video processor's resize; torch's
// linspace and the position-embedding corners.
#include "config.hpp"
#include "layout.hpp"
#include "spec.hpp"
#include "weights.hpp"

#include "../plugin_test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

qwen_vl::Options parse(const std::vector<std::pair<std::string, std::string>>& kv,
                       const char* weights = nullptr) {
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.weights = weights;
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  return qwen_vl::parse_options(qwen_vl::kQwen3Vl, &p);
}

}  // namespace

TEST_CASE("every released size's config.json gives its vision dimensions") {
  struct Size {
    const char* file;
    int64_t depth, hidden, inter, out;
    std::vector<int64_t> deepstack;
  };
  const std::vector<Size> sizes = {
      {"Qwen3-VL-2B-Instruct", 24, 1024, 4096, 2048, {5, 11, 17}},
      {"Qwen3-VL-4B-Instruct", 24, 1024, 4096, 2560, {5, 11, 17}},
      {"Qwen3-VL-8B-Instruct", 27, 1152, 4304, 4096, {8, 16, 24}},
      {"Qwen3-VL-32B-Instruct", 27, 1152, 4304, 5120, {8, 16, 24}},
      {"Qwen3-VL-30B-A3B-Instruct", 27, 1152, 4304, 2048, {8, 16, 24}},
      {"Qwen3-VL-235B-A22B-Instruct", 27, 1152, 4304, 4096, {8, 16, 24}},
  };
  for (const Size& s : sizes) {
    CAPTURE(s.file);
    const qwen_vl::Options o =
        parse({{"config_json", std::string(QWEN3_FIXTURES) + "/" + s.file + ".json"}});
    const qwen_vl::VisionConfig& c = o.model;
    CHECK(c.depth == s.depth);
    CHECK(c.hidden_size == s.hidden);
    CHECK(c.intermediate_size == s.inter);
    CHECK(c.out_hidden_size == s.out);
    CHECK(c.deepstack_visual_indexes == s.deepstack);
    CHECK(c.num_heads == 16);
    CHECK(c.pos_grid() == 48);
    CHECK(c.resize_factor() == 32);
    CHECK(qwen_vl::parameter_count(c) > 300'000'000);
  }
}

TEST_CASE("deepstack outputs follow layer order; mergers follow the config list") {
  const qwen_vl::Options o = parse({{"depth", "6"}, {"deepstack_visual_indexes", "[4, 1, 3]"}});
  const qwen_vl::VisionConfig& c = o.model;
  CHECK(c.deepstack_slot(1) == 0);
  CHECK(c.deepstack_slot(3) == 1);
  CHECK(c.deepstack_slot(4) == 2);
  CHECK(c.deepstack_slot(2) == -1);
  CHECK(c.deepstack_merger(0) == 1);
  CHECK(c.deepstack_merger(2) == 0);
  CHECK_THROWS(parse({{"depth", "4"}, {"deepstack_visual_indexes", "[4]"}}));
  CHECK_THROWS(parse({{"num_position_embeddings", "2300"}}));
}

TEST_CASE("the video processor's resize counts every frame") {
  // 16 frames of 360x640 under 32*32*768 pixels in all: beta = sqrt(16*360*640/786432).
  const auto [h, w] = qwen_vl::smart_resize_video(16, 360, 640, 2, 32, 131072, 786432);
  CHECK(h == 160);
  CHECK(w == 288);
  // Under min_pixels: scaled up with ceil.
  const auto [h2, w2] = qwen_vl::smart_resize_video(2, 64, 64, 2, 32, 131072, 786432);
  CHECK(h2 == 256);
  CHECK(w2 == 256);
  CHECK_THROWS(qwen_vl::smart_resize_video(1, 64, 64, 2, 32, 131072, 786432));
  // Images: one frame's pixels.
  const auto [h3, w3] = qwen_vl::smart_resize(360, 640, 32, 65536, 16777216);
  CHECK(h3 == 352);
  CHECK(w3 == 640);
}

TEST_CASE("linspace and the position-embedding corners") {
  const std::vector<float> v = qwen_vl::linspace_f32(47.0f, 4);
  CHECK(v[0] == 0.0f);
  CHECK(v[3] == 47.0f);
  CHECK(v[1] == doctest::Approx(47.0 / 3));
  const qwen_vl::VisionConfig c(qwen_vl::kQwen3Vl);
  const qwen_vl::Grid g{1, 2, 2};
  std::vector<int32_t> index(16);
  std::vector<float> weight(16);
  qwen_vl::pos_embed_tables(c, g, qwen_vl::window_layout(c, g).unit_order, index.data(),
                            weight.data());
  // A 2x2 grid maps to the table's four corners, each with full weight.
  CHECK(index[0] == 0);
  CHECK(weight[0] == 1.0f);
  CHECK(index[4 * 3] == 47 * 48 + 47);
  CHECK(weight[4 * 3] == doctest::Approx(1.0f));
}

// A checkpoint folder (the 8B fixture's config.json and the released
// preprocessor_config.json) as plugin.weights configures the tower alone.
TEST_CASE("a checkpoint folder alone gives the dimensions; keys may not contradict it") {
  namespace fs = std::filesystem;
  encgraph::test::TempDir dir("qwen3-folder");
  const std::string fixtures = QWEN3_FIXTURES;
  fs::copy_file(fixtures + "/Qwen3-VL-8B-Instruct.json", dir.path() / "config.json");
  fs::copy_file(fixtures + "/preprocessor_config.json", dir.path() / "preprocessor_config.json");
  const std::string folder = dir.path().string();
  const qwen_vl::Options o = parse({}, folder.c_str());
  CHECK(o.config_path == (dir.path() / "config.json").string());
  CHECK(o.model.depth == 27);
  CHECK(o.model.out_hidden_size == 4096);
  CHECK(o.min_pixels == 65536);
  CHECK(o.max_pixels == 16777216);
  CHECK(parse({{"max_pixels", "1048576"}}, folder.c_str()).max_pixels == 1048576);

  auto error = [&](const std::vector<std::pair<std::string, std::string>>& kv) {
    return encgraph::test::message_of([&] { parse(kv, folder.c_str()); });
  };
  std::string msg = error({{"hidden_size", "1024"}});
  CHECK(msg.find("config.json' vision_config.hidden_size = 1152") != std::string::npos);
  CHECK(msg.find("[plugin.config] hidden_size = 1024") != std::string::npos);

  std::ofstream(dir.path() / "preprocessor_config.json") << R"({"patch_size": 14})";
  msg = error({});
  CHECK(msg.find("preprocessor_config.json' patch_size = 14") != std::string::npos);

  std::ofstream(dir.path() / "config.json")
      << R"({"model_type": "qwen2_5_vl", "vision_config": {}})";
  msg = error({});
  CHECK(msg.find("model_type 'qwen2_5_vl'") != std::string::npos);
}

// A folder's video_preprocessor_config.json (Qwen3VLVideoProcessor's own file)
// bounds the pixels of all frames of a video; keys override it, and its sizes
// must be the tower's.
TEST_CASE("a checkpoint folder's video_preprocessor_config.json sets the video pixel bounds") {
  namespace fs = std::filesystem;
  encgraph::test::TempDir dir("qwen3-video-folder");
  const std::string fixtures = QWEN3_FIXTURES;
  fs::copy_file(fixtures + "/Qwen3-VL-8B-Instruct.json", dir.path() / "config.json");
  const std::string folder = dir.path().string();
  const qwen_vl::Options defaults = parse({}, folder.c_str());
  std::ofstream(dir.path() / "video_preprocessor_config.json")
      << R"({"size": {"shortest_edge": 8192, "longest_edge": 3145728}, "patch_size": 16,
             "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
             "image_std": [0.5, 0.5, 0.5]})";
  const qwen_vl::Options o = parse({}, folder.c_str());
  CHECK(o.video_min_pixels == 8192);
  CHECK(o.video_max_pixels == 3145728);
  CHECK(o.video_max_pixels != defaults.video_max_pixels);
  // Images keep their own bounds.
  CHECK(o.max_pixels == defaults.max_pixels);
  CHECK(parse({{"video_max_pixels", "1048576"}}, folder.c_str()).video_max_pixels == 1048576);

  std::ofstream(dir.path() / "video_preprocessor_config.json") << R"({"temporal_patch_size": 4})";
  const std::string msg = encgraph::test::message_of([&] { parse({}, folder.c_str()); });
  CHECK(msg.find("video_preprocessor_config.json' temporal_patch_size = 4") != std::string::npos);

  std::ofstream(dir.path() / "video_preprocessor_config.json") << "{not json";
  const std::string bad = encgraph::test::message_of([&] { parse({}, folder.c_str()); });
  CHECK(bad.find("video_preprocessor_config.json") != std::string::npos);
}
