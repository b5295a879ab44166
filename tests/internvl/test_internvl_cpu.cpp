// The internvl plugin on the CPU (f32): GotOcr2's tiling choice, every model
// variant (InternViT-300M's layer norms; 6B's RMSNorm, qk-norm and q/k/v
// biases; a final layernorm; an earlier feature layer) against the float64
// reference, batches of mixed tile counts through captured graphs with
// poisoned memory, a checkpoint folder configuring everything, and the
// configuration errors a user meets.
#include "internvl_config.hpp"
#include "internvl_reference.hpp"
#include "internvl_tiling.hpp"

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

std::vector<uint8_t> random_pixels(int64_t h, int64_t w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  for (uint8_t& v : px) v = static_cast<uint8_t>(rng() & 0xffu);
  return px;
}

std::vector<uint8_t> resized(const std::vector<uint8_t>& rgb, int64_t h, int64_t w, int64_t oh,
                             int64_t ow) {
  if (h == oh && w == ow) return rgb;
  return encoder_kit::image::resize(rgb.data(), h, w, 3, oh, ow,
                                    encoder_kit::image::Filter::Bicubic);
}

// The processor's tiles of an image whose grid (columns x rows) the test states.
std::vector<std::vector<uint8_t>> tiles_of(const std::vector<uint8_t>& rgb, int64_t h, int64_t w,
                                           int64_t cols, int64_t rows, int64_t side) {
  const std::vector<uint8_t> canvas = resized(rgb, h, w, rows * side, cols * side);
  std::vector<std::vector<uint8_t>> tiles;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      std::vector<uint8_t> t;
      for (int64_t y = 0; y < side; ++y) {
        const auto row = canvas.begin() + ((r * side + y) * cols * side + c * side) * 3;
        t.insert(t.end(), row, row + side * 3);
      }
      tiles.push_back(t);
    }
  if (tiles.size() > 1) tiles.push_back(resized(rgb, h, w, side, side));
  return tiles;
}

struct Image {
  int64_t h, w, cols, rows;  // the grid GotOcr2 picks for 56-pixel tiles, max_patches 4
};
// 56x56: one tile; 56x112: 2x1 without a resize; 112x112: 2x2 (the tie rule
// prefers more tiles), 60x50: one resized tile; 30x200: 4x1.
const std::vector<Image> kImages = {
    {56, 56, 1, 1}, {56, 112, 2, 1}, {112, 112, 2, 2}, {60, 50, 1, 1}, {30, 200, 4, 1}};

struct Case {
  internvl_ref::Config cfg;
  internvl_ref::Params params;
  encgraph::test::TempDir dir{"internvl-cpu"};
  std::string weights;
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<std::vector<double>> expected;

  explicit Case(const internvl_ref::Config& c) : cfg(c) {
    params = internvl_ref::random_params(cfg, 2025);
    weights = (dir.path() / "model.safetensors").string();
    internvl_ref::write_params(cfg, params, weights);
    for (size_t i = 0; i < kImages.size(); ++i) {
      const Image& im = kImages[i];
      pixels.push_back(random_pixels(im.h, im.w, 7 + i));
      expected.push_back(internvl_ref::forward(
          cfg, params, tiles_of(pixels.back(), im.h, im.w, im.cols, im.rows, cfg.image)));
    }
  }

  encgraph::RuntimeConfig runtime(const KeyValues& extra = {}) const {
    encgraph::RuntimeConfig rc;
    rc.plugin = "internvl";
    rc.plugin_dirs = encgraph::test::plugin_dirs();
    rc.device = "cpu";
    rc.weights = weights;
    rc.plugin_config = internvl_ref::plugin_config(cfg);
    rc.plugin_config.push_back({"max_patches", "4"});
    for (const auto& kv : extra) rc.plugin_config.push_back(kv);
    rc.stats_log_interval = 0;
    return rc;
  }

  void check(encgraph::RuntimeConfig rc, bool graphs) const {
    rc.use_graphs = graphs;
    encgraph::Runtime rt(rc);
    if (graphs) rt.capture();
    std::vector<encgraph::Item> items;
    for (size_t i = 0; i < kImages.size(); ++i) {
      eg_item_desc d{};
      d.modality = EG_MODALITY_IMAGE;
      d.channels = 3;
      d.height = kImages[i].h;
      d.width = kImages[i].w;
      d.frames = 1;
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

internvl::Options parse(const KeyValues& kv, const std::string& weights = "random") {
  const encgraph::test::CpuCreateParams p(kv, weights);
  return internvl::parse_options(p.get());
}

}  // namespace

TEST_CASE("the tile grid is GotOcr2's get_optimal_tiled_canvas") {
  // height, width, tile, min, max -> columns, rows (from transformers' function).
  struct Row {
    int64_t h, w, tile, lo, hi, cols, rows;
  };
  for (const Row& r : std::vector<Row>{{448, 448, 448, 1, 12, 1, 1},
                                       {600, 800, 448, 1, 12, 4, 3},
                                       {2200, 1700, 448, 1, 12, 3, 4},
                                       {375, 500, 448, 1, 12, 4, 3},
                                       {100, 1000, 448, 1, 12, 10, 1},
                                       {1344, 1344, 448, 1, 12, 3, 3},
                                       {896, 896, 448, 1, 12, 2, 2},
                                       {1000, 100, 448, 1, 6, 1, 6},
                                       {500, 500, 448, 2, 12, 2, 2},
                                       {224, 224, 448, 1, 12, 1, 1},
                                       {1024, 768, 448, 1, 12, 3, 4},
                                       {112, 112, 56, 1, 4, 2, 2}}) {
    CAPTURE(r.h);
    CAPTURE(r.w);
    const internvl::TileGrid g = internvl::optimal_grid(r.h, r.w, r.tile, r.lo, r.hi);
    CHECK(g.columns == r.cols);
    CHECK(g.rows == r.rows);
  }
  // Tiles per image: the grid's plus a thumbnail, one alone without.
  const internvl::Options o = parse({});
  CHECK(internvl::tile_count(o, 600, 800) == 13);
  CHECK(internvl::tile_count(o, 448, 448) == 1);
  CHECK(internvl::tile_count(parse({{"crop_to_patches", "false"}}), 600, 800) == 1);
}

TEST_CASE("every model variant matches the float64 reference, eagerly and in graphs") {
  internvl_ref::Config c;
  SUBCASE("InternViT-300M: layer norms, no q/k/v bias") {}
  SUBCASE("InternViT-6B: rms_norm, qk-norm, q/k/v biases") {
    c.rms_norm = c.qk_norm = c.attention_bias = true;
  }
  SUBCASE("the final layernorm (use_mean_pooling false)") {
    c.mean_pooling = false;
  }
  SUBCASE("an earlier feature layer") {
    c.feature_layer = -2, c.mean_pooling = false;
  }
  SUBCASE("a 4x4 pixel shuffle") {
    c.shuffle = 4;
  }
  const Case k(c);
  k.check(k.runtime(), false);
  encgraph::RuntimeConfig rc = k.runtime({{"max_budget_tiles", "8"}});
  rc.poison_memory = true;  // NaN output and workspace before every run
  k.check(rc, true);
}

// The folder's crop_to_patches (false here, GotOcr2's saved default) is ignored as
// InternVLProcessor ignores it: the expected outputs are the tiled ones.
TEST_CASE("a checkpoint folder configures the model and its processor") {
  const internvl_ref::Config c;  // the sizes the folder's files state
  Case k(c);
  std::ofstream(k.dir.path() / "config.json")
      << R"({"model_type": "internvl", "downsample_ratio": 0.5, "vision_feature_layer": -1,
  "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
  "text_config": {"model_type": "qwen2", "hidden_size": 40},
  "vision_config": {"model_type": "internvl_vision", "hidden_size": 32, "num_hidden_layers": 2,
   "num_attention_heads": 4, "intermediate_size": 48, "image_size": [56, 56],
   "patch_size": [14, 14], "hidden_act": "gelu", "norm_type": "layer_norm",
   "use_mean_pooling": true, "attention_bias": false, "use_qk_norm": false}})";
  std::ofstream(k.dir.path() / "preprocessor_config.json")
      << R"({"crop_to_patches": false, "min_patches": 1, "max_patches": 4, "resample": 3,
  "size": {"height": 56, "width": 56}, "image_mean": [0.485, 0.456, 0.406],
  "image_std": [0.229, 0.224, 0.225], "do_rescale": true, "rescale_factor": 0.00392156862745098})";
  const internvl::Options o = parse({}, k.dir.path().string());
  CHECK(o.model.text_hidden_size == 40);
  CHECK(o.model.image_size == 56);
  CHECK(o.processor.max_patches == 4);
  encgraph::RuntimeConfig rc = k.runtime();
  rc.weights = k.dir.path().string();
  rc.plugin_config = {{"dtype", "f32"}};
  k.check(rc, false);

  std::ofstream(k.dir.path() / "preprocessor_config.json")
      << R"({"size": {"height": 448, "width": 448}})";
  CHECK(message_of([&] { parse({}, k.dir.path().string()); }).find("size.height") !=
        std::string::npos);

  // A file without image_mean / image_std means GotOcr2's defaults (CLIP's), not
  // InternVL's ImageNet values the plugin assumes without a file.
  std::ofstream(k.dir.path() / "preprocessor_config.json")
      << R"({"size": {"height": 56, "width": 56}})";
  const internvl::Processor p = parse({}, k.dir.path().string()).processor;
  CHECK(p.mean[0] == doctest::Approx(0.48145466));
  CHECK(p.std[2] == doctest::Approx(0.27577711));
  CHECK(parse({}).processor.mean[0] == doctest::Approx(0.485));
}

TEST_CASE("configuration errors name the key and the fix") {
  CHECK(message_of([] {
          parse({{"max_budget_tiles", "8"}});
        }).find("max_budget_tiles 8") != std::string::npos);
  CHECK(message_of([] {
          parse({{"downsample_ratio", "0.3"}});
        }).find("downsample_ratio") != std::string::npos);
  CHECK(message_of([] {
          parse({{"image_size", "450"}});
        }).find("multiple of patch_size") != std::string::npos);
  CHECK(message_of([] {
          parse({{"image_size", "42"}});
        }).find("pixel shuffle") != std::string::npos);
  CHECK(message_of([] {
          parse({{"vision_feature_layer", "30"}});
        }).find("outside") != std::string::npos);
  CHECK(message_of([] {
          parse({{"min_patches", "5"}, {"max_patches", "4"}});
        }).find("min_patches 5") != std::string::npos);
  CHECK(message_of([] {
          parse({{"norm_typ", "rms_norm"}});
        }).find("norm_typ") != std::string::npos);
  // precision: the CPU path refuses FP8, naming the fix.
  const std::string fp8 = message_of([] { parse({{"precision", "fp8_linear"}}); });
  CHECK(fp8.find("runs on CUDA only") != std::string::npos);
  CHECK(fp8.find("set device = \"cuda\"") != std::string::npos);
  CHECK(parse({{"precision", "bf16"}}).precision == encoder_kit::Precision::Bf16);
}
