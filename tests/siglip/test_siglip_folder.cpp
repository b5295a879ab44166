// A checkpoint folder as plugin.weights configures the SigLIP tower: the
// released base-patch16-224 and so400m-patch14-384 config.json /
// preprocessor_config.json (tests/siglip/fixtures) give their dimensions
// without any key; a key contradicting the folder's sizes is an error naming
// both; the preprocessor's size must be image_size and its resample is used.
#include "siglip_config.hpp"
#include "siglip_weights.hpp"

#include "../cpu_create_params.hpp"
#include "../plugin_test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using encgraph::test::message_of;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

const std::string kFixtures = SIGLIP_FIXTURES;

siglip::Options parse(const std::string& weights, const KeyValues& kv = {}) {
  const encgraph::test::CpuCreateParams p(kv, weights);
  return siglip::parse_options(p.get());
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

}  // namespace

TEST_CASE("both released sizes' folders give their dimensions") {
  struct Size {
    const char* name;
    int64_t hidden, layers, heads, inter, image, patch, tokens;
  };
  const std::vector<Size> sizes = {
      {"siglip-base-patch16-224", 768, 12, 12, 3072, 224, 16, 196},
      {"siglip-so400m-patch14-384", 1152, 27, 16, 4304, 384, 14, 729},
  };
  for (const Size& s : sizes) {
    CAPTURE(s.name);
    const std::string folder = kFixtures + "/" + s.name;
    const siglip::Options o = parse(folder, {{"output", "pooled"}});
    const siglip::VisionConfig& c = o.model;
    CHECK(o.config_path == folder + "/config.json");
    CHECK(c.hidden_size == s.hidden);
    CHECK(c.num_hidden_layers == s.layers);
    CHECK(c.num_attention_heads == s.heads);
    CHECK(c.intermediate_size == s.inter);
    CHECK(c.image_size == s.image);
    CHECK(c.patch_size == s.patch);
    CHECK(c.tokens_per_image() == s.tokens);
    CHECK_FALSE(o.bilinear_resize);  // resample 3: bicubic
    // The weight-shape table without materialising the weights: embeddings,
    // the layers, post_layernorm and the pooling head.
    const int64_t d = s.hidden, f = s.inter;
    const int64_t layer = 4 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d);
    const int64_t embed = d * 3 * s.patch * s.patch + d + s.tokens * d;
    const int64_t head = d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (d * f + f) + (f * d + d);
    // The plugin's count bounds the exact one (it pads patch columns to 8).
    const int64_t exact = embed + s.layers * layer + 2 * d + head;
    CHECK(siglip::parameter_count(o) >= exact);
    CHECK(siglip::parameter_count(o) <= exact + exact / 100);
  }
}

TEST_CASE("a key contradicting the folder names both; the preprocessor must fit the tower") {
  const std::string base = kFixtures + "/siglip-base-patch16-224";
  CHECK(parse(base, {{"image_size", "224"}}).model.image_size == 224);
  std::string msg = parse_error(base, {{"image_size", "256"}});
  CHECK(has(msg, base + "/config.json' vision_config.image_size = 224"));
  CHECK(has(msg, "[plugin.config] image_size = 256"));
  // config_json overrides the folder's config.json, but the folder's
  // preprocessor must still fit the tower it gives.
  msg = parse_error(base, {{"config_json", kFixtures + "/siglip-so400m-patch14-384/config.json"}});
  CHECK(has(msg, base + "/preprocessor_config.json' size.height = 224"));
  CHECK(has(msg, "image_size = 384"));

  encgraph::test::TempDir dir("siglip-folder");
  fs::copy_file(base + "/config.json", dir.path() / "config.json");
  const std::string pre = (dir.path() / "preprocessor_config.json").string();
  write(pre, R"({"size": {"height": 384, "width": 384}})");
  msg = parse_error(dir.path().string());
  CHECK(has(msg, pre));
  CHECK(has(msg, "size.height = 384"));
  CHECK(has(msg, "image_size = 224"));
  write(pre, R"({"image_mean": [0.485, 0.456, 0.406]})");
  CHECK(has(parse_error(dir.path().string()), "image_mean"));
  write(pre, R"({"resample": 0})");
  CHECK(has(parse_error(dir.path().string()), "resample is 0"));
  write(pre, R"({"resample": 2})");
  CHECK(parse(dir.path().string()).bilinear_resize);
  CHECK_FALSE(parse(dir.path().string(), {{"resample", "bicubic"}}).bilinear_resize);

  write(dir.path() / "config.json", R"({"model_type": "qwen2_5_vl", "vision_config": {}})");
  msg = parse_error(dir.path().string());
  CHECK(has(msg, (dir.path() / "config.json").string()));
  CHECK(has(msg, "model_type 'qwen2_5_vl'"));
}
