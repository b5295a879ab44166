// The llava_onevision plugin's pure parts against numbers worked out from
// transformers' code (select_best_resolution, get_patch_output_size,
// unpad_image, the anyres_max shrink, apply_pooling's size): the grid an
// image gets, its feature map's shape, the packing plan's sources and the
// configuration errors a user meets.
#include "llava_batch.hpp"
#include "llava_config.hpp"
#include "llava_pack.hpp"
#include "llava_tiling.hpp"

#include "../cpu_create_params.hpp"
#include "../plugin_test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

namespace lo = llava_onevision;
using encgraph::test::message_of;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

lo::Options parse(const KeyValues& kv, const std::string& weights = "random") {
  const encgraph::test::CpuCreateParams p(kv, weights);
  return lo::parse_options(p.get());
}

}  // namespace

TEST_CASE("the anyres resolution is select_best_resolution's over the released pinpoints") {
  const lo::Options o = parse({});  // 384-pixel tiles, 1..6 x 1..6 of them
  REQUIRE(o.processor.pinpoints.size() == 36);
  struct Row {
    int64_t h, w, best_h, best_w, fit_h, fit_w;
  };
  for (const Row& r : std::vector<Row>{{480, 640, 768, 768, 576, 768},
                                       {384, 384, 384, 384, 384, 384},
                                       {1080, 1920, 1152, 1920, 1080, 1920},
                                       {200, 3000, 384, 2304, 154, 2304},
                                       {3000, 200, 2304, 384, 2304, 154},
                                       {500, 500, 768, 768, 768, 768},
                                       {1000, 700, 1152, 768, 1098, 768},
                                       {4000, 4000, 2304, 2304, 2304, 2304},
                                       {100, 100, 384, 384, 384, 384},
                                       {336, 1000, 384, 1152, 384, 1143}}) {
    CAPTURE(r.h);
    CAPTURE(r.w);
    const lo::Resolution best = lo::select_best_resolution(r.h, r.w, o.processor.pinpoints);
    CHECK(best.height == r.best_h);
    CHECK(best.width == r.best_w);
    const lo::Resolution fit = lo::patch_output_size(r.h, r.w, best);
    CHECK(fit.height == r.fit_h);
    CHECK(fit.width == r.fit_w);
  }
}

TEST_CASE("the feature map is unpadded and shrunk above anyres_max_9 as pack_image_features does") {
  const lo::Options o = parse({});
  struct Row {
    int64_t h, w, tiles, map_h, map_w, top, left, out_h, out_w, rows;
  };
  // rows: 729 base rows + out_h x (out_w + 1).
  for (const Row& r : std::vector<Row>{{480, 640, 5, 40, 54, 7, 0, 40, 54, 2929},
                                       {384, 384, 2, 27, 27, 0, 0, 27, 27, 1485},
                                       {1080, 1920, 16, 75, 135, 3, 0, 60, 108, 7269},
                                       {200, 3000, 7, 11, 162, 8, 0, 11, 162, 2522},
                                       {3000, 200, 7, 162, 11, 0, 8, 162, 11, 2673},
                                       {1000, 700, 7, 77, 54, 2, 0, 77, 54, 4964},
                                       {4000, 4000, 37, 162, 162, 0, 0, 81, 81, 7371},
                                       {336, 1000, 4, 27, 81, 0, 0, 27, 81, 2943}}) {
    CAPTURE(r.h);
    CAPTURE(r.w);
    const lo::ImageLayout l = lo::image_layout(o, r.h, r.w);
    CHECK(l.tiles() == r.tiles);
    CHECK(l.map_h == r.map_h);
    CHECK(l.map_w == r.map_w);
    CHECK(l.crop_top == r.top);
    CHECK(l.crop_left == r.left);
    CHECK(l.out_h == r.out_h);
    CHECK(l.out_w == r.out_w);
    CHECK(lo::image_out_rows(o, l) == r.rows);
    CHECK(lo::image_plan(o, l).rows() == r.rows);
  }
  // A video: 14 x 14 pooled rows per frame (ceil(27 / 2)), one newline.
  CHECK(lo::video_out_rows(o, 3) == 3 * 196 + 1);
  CHECK(lo::video_plan(o, 3).rows() == 3 * 196 + 1);
  // Python's float floor division, as int(h // ratio) computes it.
  CHECK(lo::python_floor_div(75.0, std::sqrt(75.0 * 135.0 / 6561.0)) == 60.0);
  CHECK(lo::python_floor_div(7.0, 3.5) == 2.0);
}

TEST_CASE("bilinear taps are PyTorch's align_corners=False source positions") {
  const std::vector<lo::Taps1d> half = lo::bilinear_taps(27, 14);
  REQUIRE(half.size() == 14);
  // Output 0 reads 0.5 * 27/14 - 0.5 = 0.4643 -> rows 0 and 1.
  CHECK(half[0].lo == 0);
  CHECK(half[0].hi == 1);
  CHECK(half[0].w_hi == doctest::Approx(0.5 * 27.0 / 14.0 - 0.5).epsilon(1e-6));
  // Output 13 reads 13.5 * 27/14 - 0.5 = 25.536 -> rows 25 and 26.
  CHECK(half[13].lo == 25);
  CHECK(half[13].hi == 26);
  CHECK(half[13].w_hi == doctest::Approx(13.5 * 27.0 / 14.0 - 0.5 - 25.0).epsilon(1e-5));
  for (const lo::Taps1d& t : half) CHECK(t.w_lo + t.w_hi == doctest::Approx(1.0));
  // A position before the first source is clamped to it: 5 -> 7 reads 0 for output 0.
  const std::vector<lo::Taps1d> up = lo::bilinear_taps(5, 7);
  CHECK(up[0].lo == 0);
  CHECK(up[0].w_hi == doctest::Approx(0.0));
  CHECK(up[6].lo == 4);
  CHECK(up[6].hi == 4);  // the last source has no right neighbour
}

TEST_CASE("the image plan reads the base tile, then the cropped grid map, and a newline per row") {
  const lo::Options o = parse({});
  const lo::ImageLayout l = lo::image_layout(o, 480, 640);  // 2 x 2 tiles, rows 7..46 kept
  const lo::PackPlan p = lo::image_plan(o, l);
  auto src = [&](int64_t row) { return p.src[static_cast<size_t>(row * lo::kTaps)]; };
  CHECK(src(0) == 0);
  CHECK(src(728) == 728);
  // Map (0, 0) is patch row 7 of grid tile 0 (tower tile 1): 729 + 7 * 27.
  CHECK(src(729) == 729 + 7 * 27);
  // Map (0, 27) is patch row 7, column 0 of grid tile 1 (tower tile 2).
  CHECK(src(729 + 27) == 2 * 729 + 7 * 27);
  // The 55th entry of the first map row is its newline; map row 20 (y 27) is in tile 2's row 0.
  CHECK(src(729 + 54) == lo::kNewlineRow);
  CHECK(src(729 + 20 * 55) == 3 * 729 + 0 * 27);
  // Copies have one tap of weight 1.
  CHECK(p.weight[static_cast<size_t>(729 * lo::kTaps)] == 1.0f);
  CHECK(p.weight[static_cast<size_t>(729 * lo::kTaps + 1)] == 0.0f);

  // An interpolated map's rows mix four sources whose weights sum to 1.
  const lo::PackPlan big = lo::image_plan(o, lo::image_layout(o, 1080, 1920));
  double sum = 0.0;
  for (int k = 0; k < lo::kTaps; ++k) sum += big.weight[static_cast<size_t>(730 * lo::kTaps + k)];
  CHECK(sum == doctest::Approx(1.0));
}

TEST_CASE("items batch into tiles with plans moved to each item's first tower row") {
  const lo::Options o = parse({{"hidden_size", "32"},
                               {"num_hidden_layers", "1"},
                               {"num_attention_heads", "4"},
                               {"intermediate_size", "48"},
                               {"image_size", "26"},
                               {"patch_size", "6"},
                               {"text_hidden_size", "40"},
                               {"image_grid_pinpoints", "[26, 26, 26, 52]"}});
  eg_item_desc video{};
  video.modality = EG_MODALITY_VIDEO;
  video.channels = 3;
  video.height = 30;
  video.width = 40;
  video.frames = 2;
  eg_item_desc image = video;
  image.modality = EG_MODALITY_IMAGE;
  image.frames = 1;
  image.height = 26;
  image.width = 52;  // 1 x 2 tiles and the base: 3 tiles
  lo::ItemData a =
      lo::make_item_data(o, lo::item_shape(o, video), lo::synthetic_patch_rows(o, 2, 1));
  lo::ItemData b =
      lo::make_item_data(o, lo::item_shape(o, image), lo::synthetic_patch_rows(o, 3, 2));
  CHECK(a.tiles == 2);
  CHECK(a.frames == 2);
  CHECK(b.tiles == 3);
  const lo::Capacity cap = lo::capacity_for(o, 5);
  std::vector<float> pixels(
      static_cast<size_t>(cap.tower_rows(o.model) * o.model.vision.patch_cols()));
  std::vector<int32_t> cu(static_cast<size_t>(cap.tiles + 1)),
      src(static_cast<size_t>(cap.out_rows(o.model) * lo::kTaps));
  std::vector<float> w(src.size());
  const lo::StagedRows s =
      lo::stage_batch(o, cap, {&a, &b}, pixels.data(), cu.data(), src.data(), w.data());
  CHECK(s.pixel_rows == 5 * 16);
  CHECK(s.cu_entries == 6);
  CHECK(s.out_rows == a.plan.rows() + b.plan.rows());
  CHECK(cu[5] == 80);
  // The image's first row (its base tile's row 0) comes after the video's 2 x 16 tower rows.
  CHECK(src[static_cast<size_t>(a.plan.rows() * lo::kTaps)] == 32);
  CHECK(src[static_cast<size_t>((a.plan.rows() - 1) * lo::kTaps)] == lo::kNewlineRow);
  // A batch past the graph is refused.
  CHECK(message_of([&] {
          lo::stage_batch(o, lo::capacity_for(o, 4), {&a, &b}, pixels.data(), cu.data(), src.data(),
                          w.data());
        }).find("does not fit") != std::string::npos);
  // A plan that points past the projected rows fails instead of reading wild.
  src[0] = 1000;
  CHECK(message_of([&] { lo::check_plan(o, cap, src.data(), w.data()); }).find("pack_src[0][0]") !=
        std::string::npos);
}

TEST_CASE("configuration errors name the key and the fix") {
  CHECK(message_of([] {
          parse({{"image_grid_pinpoints", "[384, 400]"}});
        }).find("[384, 400]") != std::string::npos);
  CHECK(message_of([] {
          parse({{"image_grid_pinpoints", "[384]"}});
        }).find("pairs") != std::string::npos);
  CHECK(message_of([] {
          parse({{"max_budget_tiles", "8"}});
        }).find("max_budget_tiles 8") != std::string::npos);
  CHECK(message_of([] {
          parse({{"vision_aspect_ratio", "pad"}});
        }).find("anyres_max") != std::string::npos);
  CHECK(message_of([] {
          parse({{"vision_feature_layer", "40"}});
        }).find("outside") != std::string::npos);
  CHECK(message_of([] { parse({{"max_patches", "4"}}); }).find("max_patches") != std::string::npos);
  CHECK(parse({{"vision_aspect_ratio", "anyres_max_4"}}).model.max_num_patches == 4);
  CHECK(parse({}).max_image_tiles() == 37);
  // precision: the CPU path refuses FP8, naming the fix; bf16 reaches the tower.
  const std::string fp8 = message_of([] { parse({{"precision", "fp8_linear"}}); });
  CHECK(fp8.find("runs on CUDA only") != std::string::npos);
  CHECK(fp8.find("set device = \"cuda\"") != std::string::npos);
  CHECK(message_of([] { parse({{"precision", "fp4"}}); }).find("fp8_linear") != std::string::npos);
  CHECK(parse({{"precision", "bf16"}}).tower("").precision == encoder_kit::Precision::Bf16);
}
