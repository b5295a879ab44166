// A checkpoint folder as plugin.weights configures the Qwen2.5-VL tower: the
// released sizes' config.json / preprocessor_config.json (tests/qwen2_5_vl/
// fixtures) give their dimensions without any key; keys override the
// preprocessor's bounds, contradict the folder's sizes only as an error naming
// both; a folder of a tiny tower runs as its explicit keys do.
#include "config.hpp"
#include "qwen_test_support.hpp"
#include "spec.hpp"
#include "weights.hpp"

#include "../cpu_create_params.hpp"

#include <doctest/doctest.h>

#include <encgraph/runtime.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using encgraph::test::message_of;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

const std::string kFixtures = QWEN_FIXTURES;

qwen_vl::Options parse(const std::string& weights, const KeyValues& kv = {}) {
  const encgraph::test::CpuCreateParams p(kv, weights);
  return qwen_vl::parse_options(qwen_vl::kQwen2_5Vl, p.get());
}

std::string parse_error(const std::string& weights, const KeyValues& kv = {}) {
  return message_of([&] { parse(weights, kv); });
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void write(const fs::path& file, const std::string& text) {
  std::ofstream(file) << text;
}

// A folder holding the 7B fixture's config.json and `preprocessor` text.
void folder_7b(const fs::path& dir, const std::string& preprocessor) {
  fs::copy_file(kFixtures + "/Qwen2.5-VL-7B-Instruct/config.json", dir / "config.json");
  write(dir / "preprocessor_config.json", preprocessor);
}

std::string tiny_config_json(const qwen_ref::Config& c, int64_t inter) {
  std::string fullatt;
  for (int64_t b : c.fullatt) fullatt += (fullatt.empty() ? "" : ", ") + std::to_string(b);
  return R"({"model_type": "qwen2_5_vl", "vision_config": {"depth": )" + std::to_string(c.depth) +
         R"(, "hidden_act": "silu", "hidden_size": )" + std::to_string(c.hidden) +
         R"(, "num_heads": )" + std::to_string(c.heads) + R"(, "intermediate_size": )" +
         std::to_string(inter) + R"(, "out_hidden_size": )" + std::to_string(c.out) +
         R"(, "patch_size": )" + std::to_string(c.patch) + R"(, "temporal_patch_size": )" +
         std::to_string(c.temporal) + R"(, "spatial_merge_size": )" + std::to_string(c.merge) +
         R"(, "window_size": )" + std::to_string(c.window) + R"(, "fullatt_block_indexes": [)" +
         fullatt + "], \"in_chans\": 3}}";
}

}  // namespace

TEST_CASE("every released size's folder gives its dimensions and pixel bounds") {
  struct Size {
    const char* name;
    int64_t out;
  };
  const std::vector<Size> sizes = {{"Qwen2.5-VL-3B-Instruct", 2048},
                                   {"Qwen2.5-VL-7B-Instruct", 3584},
                                   {"Qwen2.5-VL-32B-Instruct", 5120},
                                   {"Qwen2.5-VL-72B-Instruct", 8192}};
  for (const Size& s : sizes) {
    CAPTURE(s.name);
    const std::string folder = kFixtures + "/" + s.name;
    const qwen_vl::Options o = parse(folder);
    const qwen_vl::VisionConfig& c = o.model;
    CHECK(o.config_path == folder + "/config.json");
    CHECK(c.depth == 32);
    CHECK(c.hidden_size == 1280);
    CHECK(c.num_heads == 16);
    CHECK(c.intermediate_size == 3420);
    CHECK(c.out_hidden_size == s.out);
    CHECK(c.patch_size == 14);
    CHECK(c.temporal_patch_size == 2);
    CHECK(c.spatial_merge_size == 2);
    CHECK(c.window_size == 112);
    CHECK(c.fullatt_block_indexes == std::vector<int64_t>{7, 15, 23, 31});
    CHECK(o.min_pixels == 3136);
    CHECK(o.max_pixels == 12845056);
    // The weight-shape table without materialising the weights: patch embed,
    // 32 blocks and a merger whose last product is 5120 x out.
    const int64_t blocks = 32 * (2 * 1280 + (1280 * 3840 + 3840) + (1280 * 1280 + 1280) +
                                 2 * (3420 * 1280 + 3420) + (1280 * 3420 + 1280));
    const int64_t merger = 1280 + (5120 * 5120 + 5120) + (5120 * s.out + s.out);
    CHECK(qwen_vl::parameter_count(c) == 3 * 2 * 14 * 14 * 1280 + blocks + merger);
  }
}

TEST_CASE("keys override the folder's preprocessor; a contradicting size names both") {
  const std::string folder = kFixtures + "/Qwen2.5-VL-7B-Instruct";
  const qwen_vl::Options o = parse(folder, {{"min_pixels", "1000"}, {"depth", "32"}});
  CHECK(o.min_pixels == 1000);
  CHECK(o.max_pixels == 12845056);
  CHECK(o.model.depth == 32);  // agreeing with the folder is fine

  std::string msg = parse_error(folder, {{"depth", "24"}});
  CHECK(has(msg, folder + "/config.json' vision_config.depth = 32"));
  CHECK(has(msg, "[plugin.config] depth = 24"));
  msg = parse_error(folder, {{"out_hidden_size", "2048"}});
  CHECK(has(msg, "vision_config.out_hidden_size = 3584"));
  msg = parse_error(folder, {{"fullatt_block_indexes", "[7, 15]"}});
  CHECK(has(msg, "vision_config.fullatt_block_indexes"));
  CHECK(parse(folder, {{"fullatt_block_indexes", "[7, 15, 23, 31]"}}).model.depth == 32);

  // config_json names another config.json: it wins over the folder's, and
  // keys override it as before.
  const qwen_vl::Options other =
      parse(folder, {{"config_json", kFixtures + "/Qwen2.5-VL-3B-Instruct/config.json"},
                     {"depth", "2"},
                     {"fullatt_block_indexes", "1"}});
  CHECK(other.model.out_hidden_size == 2048);
  CHECK(other.model.depth == 2);
}

TEST_CASE("a folder of another model or processor is an error naming its file") {
  qwen_test::TempDir dir("qwen-folder");
  write(dir.path() / "config.json", R"({"model_type": "siglip", "vision_config": {}})");
  std::string msg = parse_error(dir.path().string());
  CHECK(has(msg, (dir.path() / "config.json").string()));
  CHECK(has(msg, "model_type 'siglip'"));

  const std::string pre = R"({"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
    "temporal_patch_size": 2, "merge_size": 2})";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = pre;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  auto pre_error = [&](const std::string& text) {
    qwen_test::TempDir d("qwen-folder");
    folder_7b(d.path(), text);
    std::string m = parse_error(d.path().string());
    CHECK(has(m, (d.path() / "preprocessor_config.json").string()));
    return m;
  };
  msg = pre_error(with("\"merge_size\": 2", "\"merge_size\": 3"));
  CHECK(has(msg, "merge_size = 3"));
  CHECK(has(msg, "spatial_merge_size"));
  msg = pre_error(with("\"patch_size\": 14", "\"patch_size\": 16"));
  CHECK(has(msg, "patch_size = 16"));
  msg = pre_error(with("}", R"(, "image_mean": [0.5, 0.5, 0.5]})"));
  CHECK(has(msg, "image_mean"));
  msg = pre_error(with("}", R"(, "resample": 2})"));
  CHECK(has(msg, "resample is 2"));
  msg = pre_error("[1]");
  CHECK(has(msg, "is not a JSON object"));

  // Newer files give the bounds as size.shortest_edge / longest_edge.
  qwen_test::TempDir d("qwen-folder");
  folder_7b(d.path(), R"({"size": {"shortest_edge": 4096, "longest_edge": 1048576}})");
  const qwen_vl::Options o = parse(d.path().string());
  CHECK(o.min_pixels == 4096);
  CHECK(o.max_pixels == 1048576);
}

TEST_CASE("a checkpoint folder alone runs as its explicit keys do") {
  const qwen_ref::Config cfg;
  const qwen_ref::Params params = qwen_ref::random_params(cfg, 77);
  qwen_test::TempDir dir("qwen-folder");
  write(dir.path() / "config.json", tiny_config_json(cfg, cfg.inter));
  write(dir.path() / "preprocessor_config.json",
        R"({"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2})");
  qwen_ref::write_params(cfg, params, dir.path() / "model.safetensors");

  std::vector<uint8_t> pixels(56 * 84 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  auto run = [&](encgraph::RuntimeConfig rc) {
    rc.use_graphs = false;
    encgraph::Runtime rt(rc);
    std::vector<encgraph::Item> items;
    items.push_back(rt.make_item(qwen_test::pixel_item(pixels, 1, 56, 84)));
    return rt.execute(std::move(items)).item_as_float(0);
  };
  encgraph::RuntimeConfig folder_only = qwen_test::runtime_config(cfg, "cpu", dir.path().string());
  folder_only.plugin_config.clear();
  const std::vector<float> got = run(folder_only);
  const std::vector<float> want =
      run(qwen_test::runtime_config(cfg, "cpu", (dir.path() / "model.safetensors").string()));
  REQUIRE(got.size() == want.size());
  REQUIRE(!got.empty());
  CHECK(qwen_test::rel_error(got, std::vector<double>(want.begin(), want.end())) < 1e-6);

  // Weights that contradict the folder's config name the config file.
  write(dir.path() / "config.json", tiny_config_json(cfg, cfg.inter + 16));
  const std::string msg = message_of([&] { encgraph::Runtime rt(folder_only); });
  CHECK(has(msg, "mlp.gate_proj.weight"));
  CHECK(has(msg, (dir.path() / "config.json").string()));
}

// transformers >= 4.52 saves Qwen2_5_VLForConditionalGeneration with the
// tower under "model.visual."; the released checkpoints use "visual.".
TEST_CASE("a checkpoint saved with model.visual. names runs as the released names do") {
  const qwen_ref::Config cfg;
  const qwen_ref::Params params = qwen_ref::random_params(cfg, 91);
  qwen_test::TempDir dir("qwen-nested");
  qwen_ref::write_params(cfg, params, dir.path() / "released.safetensors");
  qwen_ref::write_params(cfg, params, dir.path() / "nested.safetensors", "model.");

  std::vector<uint8_t> pixels(56 * 56 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 53) % 247);
  auto run = [&](const std::string& weights) {
    encgraph::RuntimeConfig rc = qwen_test::runtime_config(cfg, "cpu", weights);
    rc.use_graphs = false;
    encgraph::Runtime rt(rc);
    std::vector<encgraph::Item> items;
    items.push_back(rt.make_item(qwen_test::pixel_item(pixels, 1, 56, 56)));
    return rt.execute(std::move(items)).item_as_float(0);
  };
  const std::vector<float> released = run((dir.path() / "released.safetensors").string());
  const std::vector<float> saved = run((dir.path() / "nested.safetensors").string());
  REQUIRE(!released.empty());
  REQUIRE(saved.size() == released.size());
  CHECK(qwen_test::rel_error(saved, std::vector<double>(released.begin(), released.end())) < 1e-6);
}
