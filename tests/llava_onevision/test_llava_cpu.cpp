// The llava_onevision plugin on the CPU (f32) against the float64 reference:
// images of odd aspect ratios (unpadding across tiles, the anyres_max shrink)
// and a video of 3 frames in one batch, eagerly and through captured graphs
// with poisoned memory; a checkpoint folder configuring everything, with
// either weight layout (transformers 5's "model." prefix or the released one).
#include "llava_config.hpp"
#include "llava_reference.hpp"

#include "../cpu_create_params.hpp"
#include "../plugin_test_support.hpp"
#include "../test_support.hpp"

#include <encgraph/runtime.hpp>

#include <encoder_kit/image_resize.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

using encgraph::test::message_of;
using encgraph::test::rel_error;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

constexpr double kTolerance = 1e-4;  // fp32 against float64
constexpr int64_t kTile = 26;        // the reference tower's image_size

std::vector<uint8_t> random_pixels(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(n));
  for (uint8_t& v : px) v = static_cast<uint8_t>(rng() & 0xffu);
  return px;
}

std::vector<uint8_t> resized(const std::vector<uint8_t>& rgb, int64_t h, int64_t w, int64_t oh,
                             int64_t ow) {
  if (h == oh && w == ow) return rgb;
  return encoder_kit::image::resize(rgb.data(), h, w, 3, oh, ow,
                                    encoder_kit::image::Filter::Bicubic);
}

// An image and what the processor makes of it with 26-pixel tiles and the
// 1..3 x 1..3 pinpoints, worked out from transformers' functions: the best
// canvas (rows x cols tiles) and the size the image is resized to inside it.
struct Image {
  int64_t h, w, rows, cols, fit_h, fit_w;
};
// 30x50: a 2x2 canvas, 32x52 inside (map 4x8 kept of 8x8, cropped 2 rows each
// side); 90x33: 3x2, 78x29 (12x4 of 12x8); 20x90: 1x3, 18x78 (2x12 of 4x12);
// 26x26: one tile.
const std::vector<Image> kImages = {
    {30, 50, 2, 2, 32, 52}, {90, 33, 3, 2, 78, 29}, {20, 90, 1, 3, 18, 78}, {26, 26, 1, 1, 26, 26}};
constexpr int64_t kFrames = 3, kVideoH = 30, kVideoW = 40;

// The processor's tiles: the base image, then the zero-padded canvas row by row.
std::vector<std::vector<uint8_t>> tiles_of(const std::vector<uint8_t>& rgb, const Image& im) {
  std::vector<std::vector<uint8_t>> tiles = {resized(rgb, im.h, im.w, kTile, kTile)};
  const std::vector<uint8_t> fit = resized(rgb, im.h, im.w, im.fit_h, im.fit_w);
  const int64_t ch = im.rows * kTile, cw = im.cols * kTile;
  const int64_t top = (ch - im.fit_h) / 2, left = (cw - im.fit_w) / 2;
  std::vector<uint8_t> canvas(static_cast<size_t>(ch * cw * 3), 0);
  for (int64_t y = 0; y < im.fit_h; ++y)
    for (int64_t x = 0; x < im.fit_w * 3; ++x)
      canvas[((top + y) * cw + left) * 3 + x] = fit[y * im.fit_w * 3 + x];
  for (int64_t r = 0; r < im.rows; ++r)
    for (int64_t c = 0; c < im.cols; ++c) {
      std::vector<uint8_t> t;
      for (int64_t y = 0; y < kTile; ++y) {
        const auto row = canvas.begin() + ((r * kTile + y) * cw + c * kTile) * 3;
        t.insert(t.end(), row, row + kTile * 3);
      }
      tiles.push_back(t);
    }
  return tiles;
}

struct Case {
  llava_ref::Config cfg;
  llava_ref::Params params;
  encgraph::test::TempDir dir{"llava-cpu"};
  std::string weights;
  std::vector<std::vector<uint8_t>> pixels;  // the images, then the video
  std::vector<std::vector<double>> expected;

  explicit Case(const llava_ref::Config& c, const std::string& prefix = "model.",
                const std::string& tower = "vision_tower.vision_model.")
      : cfg(c) {
    params = llava_ref::random_params(cfg, 2026);
    weights = (dir.path() / "model.safetensors").string();
    llava_ref::write_params(cfg, params, weights, prefix, tower);
    for (size_t i = 0; i < kImages.size(); ++i) {
      const Image& im = kImages[i];
      pixels.push_back(random_pixels(im.h * im.w * 3, 11 + i));
      expected.push_back(llava_ref::image_features(cfg, params, tiles_of(pixels.back(), im),
                                                   im.rows, im.cols, im.h, im.w));
    }
    pixels.push_back(random_pixels(kFrames * kVideoH * kVideoW * 3, 99));
    std::vector<std::vector<uint8_t>> frames;
    for (int64_t f = 0; f < kFrames; ++f) {
      const auto first = pixels.back().begin() + f * kVideoH * kVideoW * 3;
      frames.push_back(resized(std::vector<uint8_t>(first, first + kVideoH * kVideoW * 3), kVideoH,
                               kVideoW, kTile, kTile));
    }
    expected.push_back(llava_ref::video_features(cfg, params, frames));
  }

  encgraph::RuntimeConfig runtime(const KeyValues& extra = {}) const {
    encgraph::RuntimeConfig rc;
    rc.plugin = "llava_onevision";
    rc.plugin_dirs = encgraph::test::plugin_dirs();
    rc.device = "cpu";
    rc.weights = weights;
    rc.plugin_config = llava_ref::plugin_config(cfg);
    rc.plugin_config.push_back({"max_budget_tiles", "24"});
    for (const auto& kv : extra) rc.plugin_config.push_back(kv);
    rc.stats_log_interval = 0;
    return rc;
  }

  void check(encgraph::RuntimeConfig rc, bool graphs) const {
    rc.use_graphs = graphs;
    encgraph::Runtime rt(rc);
    if (graphs) rt.capture();
    std::vector<encgraph::Item> items;
    for (size_t i = 0; i <= kImages.size(); ++i) {
      const bool video = i == kImages.size();
      eg_item_desc d{};
      d.modality = video ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = video ? kVideoH : kImages[i].h;
      d.width = video ? kVideoW : kImages[i].w;
      d.frames = video ? kFrames : 1;
      d.pixels = pixels[i].data();
      items.push_back(rt.make_item(d));
    }
    const encgraph::Result r = rt.execute(items);
    for (size_t i = 0; i < items.size(); ++i) {
      CAPTURE(i);
      const std::vector<float> got = r.item_as_float(i);
      REQUIRE(got.size() == expected[i].size());
      CHECK(rel_error(got, expected[i]) < kTolerance);
    }
  }
};

llava_onevision::Options parse(const KeyValues& kv, const std::string& weights) {
  const encgraph::test::CpuCreateParams p(kv, weights);
  return llava_onevision::parse_options(p.get());
}

}  // namespace

TEST_CASE("images of odd aspect ratios and a video match the float64 reference") {
  llava_ref::Config c;
  SUBCASE("anyres_max_9: every map kept whole") {}
  SUBCASE("anyres_max_1: the larger maps shrunk bilinearly") {
    c.max_num_patches = 1;
  }
  const Case k(c);
  k.check(k.runtime(), false);
  encgraph::RuntimeConfig rc = k.runtime();
  rc.poison_memory = true;  // NaN output and workspace before every run
  k.check(rc, true);
}

TEST_CASE("a checkpoint folder configures the model, in either weight layout") {
  const llava_ref::Config c;
  std::string prefix, tower = "vision_tower.vision_model.";
  SUBCASE("transformers 5 (model.vision_tower...)") {
    prefix = "model.";
  }
  SUBCASE("the released llava-hf files (vision_tower...)") {
    prefix = "";
  }
  SUBCASE("the bare tower's names (model.vision_tower.embeddings...)") {
    prefix = "model.";
    tower = "vision_tower.";
  }
  Case k(c, prefix, tower);
  std::ofstream(k.dir.path() / "config.json")
      << R"({"model_type": "llava_onevision", "vision_feature_layer": -1,
  "vision_feature_select_strategy": "full", "vision_aspect_ratio": "anyres_max_9",
  "projector_hidden_act": "gelu",
  "image_grid_pinpoints": [[26, 26], [26, 52], [26, 78], [52, 26], [52, 52], [52, 78],
                           [78, 26], [78, 52], [78, 78]],
  "text_config": {"model_type": "qwen2", "hidden_size": 40},
  "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32,
   "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 48,
   "image_size": 26, "patch_size": 6, "hidden_act": "gelu_pytorch_tanh"}})";
  std::ofstream(k.dir.path() / "preprocessor_config.json")
      << R"({"size": {"height": 26, "width": 26}, "image_mean": [0.5, 0.5, 0.5],
  "image_std": [0.5, 0.5, 0.5], "resample": 3, "do_rescale": true})";
  const llava_onevision::Options o = parse({}, k.dir.path().string());
  CHECK(o.model.text_hidden_size == 40);
  CHECK(o.model.vision.image_size == 26);
  CHECK(o.processor.pinpoints.size() == 9);
  encgraph::RuntimeConfig rc = k.runtime();
  rc.weights = k.dir.path().string();
  rc.plugin_config = {{"dtype", "f32"}, {"max_budget_tiles", "24"}};
  k.check(rc, false);

  // The tiles the processor makes and the map the model unpads must agree.
  std::ofstream(k.dir.path() / "preprocessor_config.json")
      << R"({"size": {"height": 26, "width": 26}, "image_grid_pinpoints": [[26, 26]]})";
  CHECK(message_of([&] { parse({}, k.dir.path().string()); }).find("differs from config.json") !=
        std::string::npos);
  std::ofstream(k.dir.path() / "preprocessor_config.json") << R"({"size": {"height": 384}})";
  CHECK(message_of([&] { parse({}, k.dir.path().string()); }).find("size.height") !=
        std::string::npos);
  // SigLIP has no CLS token: "default" would drop a patch.
  std::ofstream(k.dir.path() / "preprocessor_config.json") << "{}";
  std::ofstream(k.dir.path() / "config.json")
      << R"({"model_type": "llava_onevision", "vision_feature_select_strategy": "default",
  "vision_config": {"hidden_size": 32}, "text_config": {"hidden_size": 40}})";
  CHECK(message_of([&] { parse({}, k.dir.path().string()); }).find("\"full\"") !=
        std::string::npos);
}
