// The deepseek_ocr2 model library's parts without the runtime: the
// processor's crop-grid rule against values worked out by hand from
// transformers' get_optimal_tiled_canvas, the config.json readers (both
// layouts), and weights found by either checkpoint layout's names.
#include "../plugin_test_support.hpp"
#include "dsocr2_config.hpp"
#include "dsocr2_layout.hpp"
#include "dsocr2_reference.hpp"
#include "dsocr2_weights.hpp"
#include "dsocr2_work.hpp"

#include <encoder_kit/safetensors.hpp>
#include <encoder_kit/weights.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace {

dsocr2::Options options(const std::vector<std::pair<std::string, std::string>>& kv,
                        const char* weights = nullptr) {
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.weights = weights;
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  return dsocr2::parse_options(&p);
}

void write(const std::filesystem::path& f, const std::string& text) {
  std::ofstream(f) << text;
}

}  // namespace

TEST_CASE("the crop grid follows get_optimal_tiled_canvas (released sizes, worked by hand)") {
  const dsocr2::ModelConfig m;  // tile 768, 2..6 crops
  struct Case {
    int64_t w, h, cols, rows;
  };
  // (w x h -> cols x rows); docs/models/deepseek_ocr2.md derives each.
  const Case cases[] = {
      {800, 600, 3, 2},   {1240, 1754, 2, 3}, {576, 2000, 1, 4}, {1920, 1080, 2, 1},
      {1000, 1000, 2, 2}, {1000, 800, 2, 2},  // ties at 0.75 and 0.25; area below 2x tiles
      {2500, 2000, 3, 2},                     // the same ties, area above: the later grid
      {700, 500, 0, 0},   {768, 768, 0, 0},   // not larger than one tile: no crops
      {769, 100, 6, 1},                       // aspect 7.69: the widest grid
  };
  for (const Case& c : cases) {
    CAPTURE(c.w);
    CAPTURE(c.h);
    const dsocr2::CropGrid g = dsocr2::crop_grid(m, c.h, c.w);
    CHECK(g.cols == c.cols);
    CHECK(g.rows == c.rows);
  }
}

namespace {

// One view's FLOPs at the released sizes, by hand in float64: `g` patches a
// side, `per` windows of 14 x 14 a side once padded, `n` encoder image tokens.
double view_flops_by_hand(double g, double per, double n) {
  const double gg = g * g, D = 768, padded = per * per * 196;
  double f = 2 * gg * 768 * D;  // patch embedding: 3 x 16 x 16 in
  // 8 windowed layers (over padded rows) and 4 global ones; every MLP on gg rows.
  f += 8 * (2 * padded * (3 * D * D + D * D) + 4 * D * per * per * 196 * 196);
  f += 4 * (2 * gg * (3 * D * D + D * D) + 4 * D * gg * gg);
  f += 12 * 2 * gg * 2 * D * 3072;
  const double half = std::ceil(g / 2);
  f += 2 * gg * (D * 256 + 9 * 256 * 256) + 2 * half * half * 9 * 256 * 512 + 2 * n * 9 * 512 * 896;
  // 24 encoder layers over 2n rows: q 896, k and v 128 each, o, gate/up/down
  // of 4864; attention over the prefix mask's pairs.
  const double row = 2 * (896.0 * (896 + 2 * 128) + 896.0 * 896 + 3 * 896.0 * 4864);
  f += 24 * (2 * n * row + 4 * 896 * (2 * n * n + n * (n + 1) / 2));
  return f + 2 * n * 896 * 1280;  // projector
}

}  // namespace

TEST_CASE("an image's work: the global view and each crop by their FLOPs (released sizes)") {
  const dsocr2::ModelConfig m;
  const double global = view_flops_by_hand(64, 5, 256), tile = view_flops_by_hand(48, 4, 144);
  CHECK(static_cast<double>(dsocr2::view_flops(m, 1024).value()) ==
        doctest::Approx(global).epsilon(1e-12));
  CHECK(static_cast<double>(dsocr2::view_flops(m, 768).value()) ==
        doctest::Approx(tile).epsilon(1e-12));
  // The global view costs 1.87 crops, not one (4096 against 2304 SAM patches,
  // global attention over 4096² against 2304² pairs).
  CHECK(global > 1.8 * tile);
  const double unit = 12 * 2 * (4 * 768.0 * 768 + 2 * 768.0 * 3072);
  CHECK(static_cast<double>(dsocr2::sam_patch_unit_flops(m)) == doctest::Approx(unit));
  for (int64_t crops = 0; crops <= m.max_crops; ++crops) {
    CAPTURE(crops);
    const double expected = (global + static_cast<double>(crops) * tile) / unit;
    CHECK(std::abs(static_cast<double>(dsocr2::image_work(m, crops)) - expected) <= 0.5);
  }
}

TEST_CASE("the plugin's crop grid agrees with the reference's on the small config") {
  const dsocr2_ref::Config rc;
  const dsocr2::Options o = options(dsocr2_ref::plugin_config(rc));
  CHECK(o.model.global_tokens() == 16);
  CHECK(o.model.local_tokens() == 9);
  // by hand (tile 48): 60x48 has aspect 1.25 (ties; area 2880 < 6912) -> 2x2;
  // 100x80 (area 8000 > 6912) -> 3x2; 30x100 -> 1x3; 100x52 -> 2x1.
  const int64_t hand[][4] = {{60, 48, 2, 2}, {100, 80, 3, 2}, {30, 100, 1, 3}, {100, 52, 2, 1}};
  for (const auto& h : hand) {
    const dsocr2::CropGrid g = dsocr2::crop_grid(o.model, h[1], h[0]);
    CHECK(g.cols == h[2]);
    CHECK(g.rows == h[3]);
  }
  for (int64_t h = 1; h <= 160; h += 7)
    for (int64_t w = 1; w <= 160; w += 5) {
      const dsocr2::CropGrid g = dsocr2::crop_grid(o.model, h, w);
      const auto ref = dsocr2_ref::crop_grid(rc, h, w);
      CHECK(g.cols == ref.first);
      CHECK(g.rows == ref.second);
    }
}

TEST_CASE("preprocessing: the global view keeps the aspect, pads with 127, crops are row-major") {
  const dsocr2_ref::Config rc;
  const dsocr2::Options o = options(dsocr2_ref::plugin_config(rc));
  const auto px = dsocr2_ref::random_pixels(50, 70, 7);
  const dsocr2::Views v = dsocr2::preprocess(o.model, px.data(), 50, 70, 3);
  const dsocr2_ref::Views r = dsocr2_ref::preprocess(rc, px, 50, 70);
  REQUIRE(v.num_crops == 6);
  REQUIRE(r.crops.size() == 6);
  REQUIRE(v.global.size() == r.global.size());
  double worst = 0;
  for (size_t i = 0; i < v.global.size(); ++i)
    worst = std::max(worst, std::fabs(v.global[i] - r.global[i]));
  for (size_t c = 0; c < 6; ++c)
    for (size_t i = 0; i < r.crops[c].size(); ++i)
      worst = std::max(worst, std::fabs(v.crops[c * r.crops[c].size() + i] - r.crops[c][i]));
  CHECK(worst < 1e-6);
  // 70x50 -> 64x46 (round(50*64/70) = 46): 9 pad rows on top, (127/255-0.5)/0.5.
  CHECK(v.global[0] == doctest::Approx(127.0 / 255.0 * 2.0 - 1.0));
}

TEST_CASE("config.json: transformers' layout and DeepSeek's release layout") {
  encgraph::test::TempDir dir("dsocr2-config");
  const auto hf = dir.path() / "hf.json";
  write(hf, R"({"model_type": "deepseek_ocr2",
    "vision_config": {"sam_config": {"hidden_size": 64, "num_hidden_layers": 4,
        "num_attention_heads": 4, "global_attn_indexes": [1, 3], "downsample_channels": [48, 40],
        "window_size": 7},
      "encoder_config": {"hidden_size": 40, "num_hidden_layers": 3, "num_attention_heads": 5,
        "num_key_value_heads": 1, "intermediate_size": 80, "rope_theta": 500000.0}},
    "text_config": {"hidden_size": 56}})");
  dsocr2::Options o = options({{"config_json", hf.string()}});
  CHECK(o.model.sam_hidden_size == 64);
  CHECK(o.model.sam_mlp_dim == 256);
  CHECK(o.model.sam_layers == 4);
  CHECK(o.model.global_attn_indexes == std::vector<int64_t>{1, 3});
  CHECK(o.model.window_size == 7);
  CHECK(o.model.downsample_channels == std::vector<int64_t>{48, 40});
  CHECK(o.model.encoder_layers == 3);
  CHECK(o.model.encoder_kv_heads == 1);
  CHECK(o.model.rope_theta == 500000.0);
  CHECK(o.model.text_hidden_size == 56);

  const auto rel = dir.path() / "release.json";
  write(rel, R"({"model_type": "deepseek_vl_v2",
    "vision_config": {"image_size": 1024, "width": {"sam_vit_b": {"width": 768, "layers": 12,
      "heads": 12, "global_attn_indexes": [2, 5, 8, 11]}, "qwen2-0-5b": {"dim": 896}}},
    "projector_config": {"input_dim": 896, "n_embed": 1280, "projector_type": "linear"}})");
  o = options({{"config_json", rel.string()}});
  CHECK(o.model.sam_hidden_size == 768);
  CHECK(o.model.encoder_hidden() == 896);
  CHECK(o.model.encoder_layers == 24);
  CHECK(o.model.encoder_heads == 14);
  CHECK(o.model.text_hidden_size == 1280);
  CHECK(o.model.global_tokens() == 256);
  CHECK(o.model.local_tokens() == 144);

  const auto bad = dir.path() / "bad.json";
  write(bad, R"({"model_type": "qwen2_vl", "vision_config": {}})");
  CHECK(encgraph::test::message_of([&] {
          options({{"config_json", bad.string()}});
        }).find("model_type 'qwen2_vl'") != std::string::npos);
  CHECK(encgraph::test::message_of([&] {
          options({{"sam_layerz", "3"}});
        }).find("sam_layerz") != std::string::npos);
}

TEST_CASE("weights load by either layout's names, and a missing tensor is named") {
  const dsocr2_ref::Config rc;
  const dsocr2::Options o = options(dsocr2_ref::plugin_config(rc));
  const dsocr2_ref::Params params = dsocr2_ref::random_params(rc, 11);
  encgraph::test::TempDir dir("dsocr2-weights");
  const auto release = dir.path() / "release.safetensors";
  const auto hf = dir.path() / "hf.safetensors";
  const auto bare = dir.path() / "bare.safetensors";
  dsocr2_ref::write_params(rc, params, release);
  dsocr2_ref::write_params(rc, params, hf, /*transformers=*/true, "model.");
  dsocr2_ref::write_params(rc, params, bare, /*transformers=*/true, "");
  for (const auto& f : {release, hf, bare}) {
    CAPTURE(f);
    const encoder_kit::WeightSource src(f.string(), 0);
    const dsocr2::Weights w = dsocr2::load_weights(o.model, src);
    const auto& sep = params.at("model.view_seperator");
    REQUIRE(w.view_separator.size() == sep.size());
    CHECK(w.view_separator[3] == static_cast<float>(sep[3]));
    CHECK(w.sam[2].rel_h[5] ==
          static_cast<float>(params.at("model.sam_model.blocks.2.attn.rel_pos_h")[5]));
    CHECK(w.neck_ln2_b[1] == static_cast<float>(params.at("model.sam_model.neck.3.bias")[1]));
    CHECK(w.down2_w[7] == static_cast<float>(params.at("model.sam_model.net_3.weight")[7]));
    CHECK(w.query_local[4] ==
          static_cast<float>(params.at("model.qwen2_model.query_768.weight")[4]));
    CHECK(w.encoder[1].k_b[2] ==
          static_cast<float>(
              params.at("model.qwen2_model.model.model.layers.1.self_attn.k_proj.bias")[2]));
    CHECK(w.proj_b[0] == static_cast<float>(params.at("model.projector.layers.bias")[0]));
  }
  // A checkpoint without the tower names both layouts' probe tensors.
  const auto other = dir.path() / "other.safetensors";
  encoder_kit::write_safetensors(other, {encoder_kit::f32_tensor("lm_head.weight", {2}, {1, 2})});
  const encoder_kit::WeightSource src(other.string(), 0);
  CHECK(encgraph::test::message_of([&] {
          dsocr2::load_weights(o.model, src);
        }).find("model.sam_model.patch_embed.proj.weight") != std::string::npos);
}
