// The plugin's CPU path (f32) on a tiny tower against the float64 reference:
// every output mode (last hidden state, pooled, feature layers), batches
// through captured graphs with padding and poisoned memory, NaN padding at the
// ABI level, preprocessing (resize, grey, RGBA), checkpoint prefixes and
// shards, and the configuration errors a user meets; ABI 1.1: both named
// outputs from one forward, size-safe model info, host-staged capture inputs,
// specs from descriptions (ABI 1.2).
#include "../spec_for_checks.hpp"
#include "siglip_test_support.hpp"

#include <encoder_kit/image_resize.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>

namespace {

using siglip_test::KeyValues;
using siglip_test::rel_error;

constexpr double kTolerance = 1e-4;  // fp32 against float64
// The same pixels at two positions of one batch: only the fp32 summation order
// may differ (BLAS kernels block rows by position); a few ulps of fp32 through
// the tower's layers stay far below this, a different image far above (1e-3).
constexpr double kSameInput = 1e-5;

struct Sample {
  std::vector<uint8_t> rgb;  // at the model's size
  siglip_ref::Outputs expected;
};

// One tiny tower (26x26 images: 16 tokens of 4x4 patches of 6x6 pixels, the
// last 2 pixel rows and columns dropped by the convolution as so400m/14 at 384
// drops 6; 108 values per patch, padded to 112), its checkpoint and reference
// outputs, built once.
struct Fixture {
  siglip_ref::Config cfg;
  siglip_ref::Params params;
  siglip_test::TempDir dir{"siglip-cpu"};
  std::string weights;
  std::vector<Sample> samples;

  Fixture() {
    params = siglip_ref::random_params(cfg, 2024);
    weights = (dir.path() / "tiny.safetensors").string();
    siglip_ref::write_params(cfg, params, weights);
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      Sample s{siglip_ref::random_pixels(cfg.image, cfg.image, 3, seed), {}};
      s.expected = siglip_ref::forward(cfg, params, s.rgb);
      samples.push_back(std::move(s));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// kv with `extra` on top: a key in both takes extra's value (a TOML table
// holds each key once, and the plugin refuses a key given twice).
KeyValues with(KeyValues kv, const KeyValues& extra) {
  for (const auto& [key, value] : extra) {
    auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& e) { return e.first == key; });
    if (it != kv.end())
      it->second = value;
    else
      kv.emplace_back(key, value);
  }
  return kv;
}

encgraph::RuntimeConfig config(const KeyValues& extra = {}) {
  auto& f = fixture();
  return siglip_test::runtime_config(with(siglip_ref::plugin_config(f.cfg), extra), "cpu",
                                     f.weights);
}

std::vector<eg_item_desc> descs(const std::vector<size_t>& which) {
  std::vector<eg_item_desc> d;
  const int64_t side = fixture().cfg.image;
  for (size_t k : which) d.push_back(siglip_test::pixel_item(fixture().samples[k].rgb, side, side));
  return d;
}

using Expect = std::function<const std::vector<double>&(const siglip_ref::Outputs&)>;

void check_against(const std::vector<std::vector<float>>& got, const std::vector<size_t>& which,
                   const Expect& expect) {
  REQUIRE(got.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    CAPTURE(which[i]);
    const double e = rel_error(got[i], expect(fixture().samples[which[i]].expected));
    CHECK(e < kTolerance);
  }
}

const std::vector<double>& last(const siglip_ref::Outputs& o) {
  return o.last_hidden_state;
}

using encgraph::test::message_of;

// The pixel rows the plugin's preprocessing stages for one item (its
// "pixel_rows" buffer in a one-item batch, as prepare_replay_buffers writes
// it): exactly what the encoder reads, as bytes.
std::vector<uint8_t> staged_pixel_rows(const KeyValues& kv, const eg_item_desc& desc) {
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("siglip").api;
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.weights = "random";
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> instance(inst, api->destroy);
  eg_item* it = nullptr;
  REQUIRE_MESSAGE(api->item_create(inst, &desc, &it, &err) == EG_OK, err.message);
  auto destroy_item = [&](eg_item* item) { api->item_destroy(inst, item); };
  std::unique_ptr<eg_item, decltype(destroy_item)> item(it, destroy_item);
  eg_item_spec spec{};
  REQUIRE(api->item_spec(inst, it, &spec, &err) == EG_OK);
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  eg_graph_shape shape{};
  shape.token_budget = spec.output_tokens;
  shape.max_batch_size = 1;
  const auto n = static_cast<size_t>(info.num_buffers);
  std::vector<std::vector<uint8_t>> host(n);
  std::vector<eg_replay_buffer> replay(n);
  int pixels = -1;
  for (int b = 0; b < info.num_buffers; ++b) {
    if (std::string(info.buffers[b].name) == "pixel_rows") pixels = b;
    eg_tensor& t = replay[b].staging;
    REQUIRE(api->buffer_shape(inst, &shape, b, &t, &err) == EG_OK);
    t.dtype = info.buffers[b].dtype;
    t.device = EG_DEVICE_CPU;
    size_t bytes = encoder_kit::dtype_bytes(info.buffers[b].dtype);
    for (int d = 0; d < t.ndim; ++d) bytes *= static_cast<size_t>(t.shape[d]);
    host[b].assign(bytes, 0);
    t.data = host[b].data();
    replay[b].rows = -1;
  }
  REQUIRE(pixels >= 0);
  const eg_item* items[] = {it};
  REQUIRE_MESSAGE(api->prepare_replay_buffers(inst, &shape, items, 1, replay.data(),
                                              info.num_buffers, &err) == EG_OK,
                  err.message);
  const eg_tensor& t = replay[pixels].staging;
  REQUIRE(replay[pixels].rows > 0);
  REQUIRE(replay[pixels].rows <= t.shape[0]);
  host[pixels].resize(host[pixels].size() / static_cast<size_t>(t.shape[0]) *
                      static_cast<size_t>(replay[pixels].rows));
  return host[pixels];
}

}  // namespace

TEST_CASE("each output mode matches the float64 reference") {
  const std::vector<size_t> all = {0, 1, 2, 3, 4};
  const int64_t layers = fixture().cfg.layers;
  SUBCASE("last_hidden_state") {
    encgraph::Runtime rt(config());
    CHECK(rt.model_info().out_hidden_size == fixture().cfg.hidden);
    check_against(siglip_test::run(config(), descs(all), false), all, last);
  }
  SUBCASE("pooled") {
    check_against(
        siglip_test::run(config({{"output", "pooled"}}), descs(all), false), all,
        [](const siglip_ref::Outputs& o) -> const auto& { return o.pooled; });
  }
  SUBCASE("feature layers: hidden_states[k] without post_layernorm") {
    for (int64_t k : {int64_t{-2}, int64_t{-1}, int64_t{0}, int64_t{1}}) {
      CAPTURE(k);
      const size_t index = static_cast<size_t>(k >= 0 ? k : layers + 1 + k);
      check_against(
          siglip_test::run(config({{"feature_layer", std::to_string(k)}}), descs(all), false),
          all, [&](const siglip_ref::Outputs& o) -> const auto& { return o.hidden_states[index]; });
    }
  }
}

TEST_CASE("budgets are whole images; padded graph batches match with poisoned memory") {
  const siglip_ref::Config& c = fixture().cfg;
  encgraph::RuntimeConfig rc = config({{"max_budget_images", "4"}});
  rc.poison_memory = true;  // NaN output and workspace before every run
  {
    encgraph::Runtime rt(rc);
    CHECK(rt.plan().token_budgets ==
          std::vector<int64_t>{c.tokens(), 2 * c.tokens(), 4 * c.tokens()});
    CHECK(rt.plan().max_batch_size == 4);
  }
  const std::vector<size_t> order = {3, 0, 4, 1, 2, 2, 0};  // batches of 4 and 3 (padded)
  encgraph::Stats st;
  check_against(siglip_test::run(rc, descs(order), true, &st), order, last);
  CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
  CHECK(st.batches_eager == 0);
  CHECK(st.padded_token_efficiency < 1.0);
}

TEST_CASE("pooled output through graphs: budgets count images") {
  encgraph::RuntimeConfig rc = config({{"output", "pooled"}, {"max_budget_images", "16"}});
  {
    encgraph::Runtime rt(rc);
    CHECK(rt.plan().token_budgets == std::vector<int64_t>{4, 8, 16});
    CHECK(rt.plan().max_batch_size == 4);
  }
  rc.budgets.token_budgets = {8};
  rc.budgets.max_items_per_batch = 8;
  rc.poison_memory = true;
  const std::vector<size_t> order = {1, 2, 3};  // 3 of 8 images: padded sequences
  encgraph::Stats st;
  check_against(
      siglip_test::run(rc, descs(order), true, &st), order,
      [](const siglip_ref::Outputs& o) -> const auto& { return o.pooled; });
  CHECK(st.graph_hits == 3);
}

TEST_CASE("outputs = [last_hidden_state, pooled]: one forward yields both") {
  const siglip_ref::Config& c = fixture().cfg;
  const std::vector<size_t> order = {3, 0, 4, 1, 2};  // batches of 4 and 1 (padded)
  for (bool graphs : {false, true}) {
    CAPTURE(graphs);
    encgraph::RuntimeConfig rc =
        config({{"outputs", "[\"last_hidden_state\", \"pooled\"]"}, {"max_budget_images", "4"}});
    rc.use_graphs = graphs;
    rc.poison_memory = true;  // NaN outputs and workspace before every run
    encgraph::Runtime rt(rc);
    REQUIRE(rt.outputs().size() == 2);
    CHECK(rt.outputs()[0].name == "last_hidden_state");
    CHECK(rt.outputs()[0].rows_per_item == 0);
    CHECK(rt.outputs()[1].name == "pooled");
    CHECK(rt.outputs()[1].rows_per_item == 1);
    CHECK(rt.outputs()[1].width == c.hidden);
    REQUIRE(rt.model_info().path_units[0] != nullptr);
    CHECK(std::string(rt.model_info().path_units[0]) == "patch tokens");
    CHECK(rt.plan().token_budgets ==
          std::vector<int64_t>{c.tokens(), 2 * c.tokens(), 4 * c.tokens()});
    if (graphs) rt.capture();
    std::vector<encgraph::Item> items;
    for (const eg_item_desc& d : descs(order)) items.push_back(rt.make_item(d));
    const encgraph::Result r = rt.execute(items);
    REQUIRE(r.num_outputs() == 2);
    for (size_t i = 0; i < order.size(); ++i) {
      CAPTURE(i);
      const siglip_ref::Outputs& want = fixture().samples[order[i]].expected;
      CHECK(r.rows(i, 0) == c.tokens());
      CHECK(rel_error(r.item_as_float(i, 0), want.last_hidden_state) < kTolerance);
      CHECK(r.rows(i, 1) == 1);
      CHECK(rel_error(r.item_as_float(i, 1), want.pooled) < kTolerance);
    }
    if (graphs) {
      const encgraph::Stats st = rt.stats();
      CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
      CHECK(st.batches_eager == 0);
    }
  }
}

TEST_CASE("outputs = [pooled, last_hidden_state]: budgets count images, both match") {
  const siglip_ref::Config& c = fixture().cfg;
  encgraph::RuntimeConfig rc = config({{"outputs", "[pooled, last_hidden_state]"}});
  rc.budgets.token_budgets = {4};
  rc.budgets.max_items_per_batch = 4;
  rc.poison_memory = true;
  encgraph::Runtime rt(rc);
  REQUIRE(rt.outputs().size() == 2);
  CHECK(rt.outputs()[0].name == "pooled");
  CHECK(rt.outputs()[1].rows_per_item == c.tokens());
  CHECK(std::string(rt.model_info().path_units[0]) == "images");
  rt.capture();
  const std::vector<size_t> order = {1, 2, 4};  // 3 of 4 images: a padded sequence
  std::vector<encgraph::Item> items;
  for (const eg_item_desc& d : descs(order)) items.push_back(rt.make_item(d));
  CHECK(items[0].spec().output_tokens == 1);
  const encgraph::Result r = rt.execute(items);
  for (size_t i = 0; i < order.size(); ++i) {
    CAPTURE(i);
    const siglip_ref::Outputs& want = fixture().samples[order[i]].expected;
    CHECK(rel_error(r.item_as_float(i, 0), want.pooled) < kTolerance);
    CHECK(rel_error(r.item_as_float(i, 1), want.last_hidden_state) < kTolerance);
  }
  CHECK(rt.stats().graph_hits == 3);
}

TEST_CASE("ABI 1.1: size-safe model info, output shapes, host-staged capture inputs") {
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("siglip").api;
  CHECK(api->abi_minor == EG_ABI_VERSION_MINOR);
  CHECK(api->struct_size == EG_PLUGIN_API_V1_4_SIZE);
  CHECK((api->flags & EG_PLUGIN_CONCURRENT_ITEMS) != 0);  // items made on several threads
  CHECK(!api->prepare_capture_inputs);
  REQUIRE(static_cast<bool>(api->prepare_capture_staging));
  REQUIRE(static_cast<bool>(api->output_shape_at));
  const KeyValues kv =
      with(siglip_ref::plugin_config(fixture().cfg), {{"outputs", "[last_hidden_state, pooled]"}});
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.weights = "random";
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> guard(inst, api->destroy);

  // A 1.0-sized model info: the outputs past its end are not written.
  std::vector<uint8_t> bytes(sizeof(eg_model_info), 0xAB);
  auto* small = reinterpret_cast<eg_model_info*>(bytes.data());
  small->struct_size = EG_MODEL_INFO_V1_0_SIZE;
  REQUIRE(api->model_info(inst, small, &err) == EG_OK);
  CHECK(small->num_buffers == 2);
  CHECK(std::all_of(bytes.begin() + EG_MODEL_INFO_V1_0_SIZE, bytes.end(),
                    [](uint8_t b) { return b == 0xAB; }));
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  REQUIRE(info.num_outputs == 2);
  CHECK(std::string(info.outputs[1].name) == "pooled");

  const int64_t t = fixture().cfg.tokens();
  eg_graph_shape shape{};
  shape.token_budget = 3 * t;
  shape.max_batch_size = 3;
  eg_tensor o0{}, o1{}, bad{};
  REQUIRE(api->output_shape_at(inst, &shape, 0, &o0, &err) == EG_OK);
  REQUIRE(api->output_shape_at(inst, &shape, 1, &o1, &err) == EG_OK);
  CHECK(o0.shape[0] == 3 * t);
  CHECK(o1.shape[0] == 3);
  CHECK(o1.shape[1] == fixture().cfg.hidden);
  CHECK(api->output_shape_at(inst, &shape, 2, &bad, &err) == EG_ERR_INVALID_ARGUMENT);

  // Capture staging: the offsets in host memory, pixel rows left zero.
  std::vector<std::vector<uint8_t>> memory(2);
  std::vector<eg_tensor> buffers(2);
  std::vector<eg_replay_buffer> staging(2);
  for (int b = 0; b < 2; ++b) {
    REQUIRE(api->buffer_shape(inst, &shape, b, &buffers[b], &err) == EG_OK);
    buffers[b].dtype = info.buffers[b].dtype;
    buffers[b].device = EG_DEVICE_CPU;
    size_t n = 4;
    for (int d = 0; d < buffers[b].ndim; ++d) n *= static_cast<size_t>(buffers[b].shape[d]);
    memory[b].assign(n, 0);
    buffers[b].data = memory[b].data();
    staging[b].staging = buffers[b];
    staging[b].rows = -2;
  }
  REQUIRE_MESSAGE(api->prepare_capture_staging(inst, &shape, staging.data(), 2, &err) == EG_OK,
                  err.message);
  CHECK(staging[0].rows == -1);
  CHECK(staging[1].rows == 4);
  const auto* cu = reinterpret_cast<const int32_t*>(memory[1].data());
  CHECK(std::vector<int32_t>(cu, cu + 4) == std::vector<int32_t>{0, static_cast<int32_t>(t),
                                                                 static_cast<int32_t>(2 * t),
                                                                 static_cast<int32_t>(3 * t)});

  // A forward whose arguments carry no outputs array cannot write "pooled":
  // an error naming the output, not a silent skip.
  std::vector<float> out0(static_cast<size_t>(o0.shape[0] * o0.shape[1]));
  std::vector<float> out1(static_cast<size_t>(o1.shape[0] * o1.shape[1]), -7.0f);
  size_t ws = 0;
  REQUIRE(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  std::vector<float> workspace(ws / 4 + 64);
  eg_forward_args args{};
  args.shape = shape;
  args.buffers = buffers.data();
  args.num_buffers = 2;
  args.output = o0;
  args.output.data = out0.data();
  args.workspace = workspace.data();
  args.workspace_size = ws;
  CHECK(api->forward(inst, &args, &err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(std::string(err.message).find("output 1") != std::string::npos);
  // With both outputs: the warm-up forward writes finite rows into each.
  eg_tensor outs[2] = {args.output, o1};
  outs[1].data = out1.data();
  args.struct_size = sizeof(args);
  args.outputs = outs;
  args.num_outputs = 2;
  REQUIRE_MESSAGE(api->forward(inst, &args, &err) == EG_OK, err.message);
  CHECK(siglip_test::all_finite(out0));
  CHECK(siglip_test::all_finite(out1));
  CHECK(std::none_of(out1.begin(), out1.end(), [](float v) { return v == -7.0f; }));
}

TEST_CASE("ABI 1.2: spec_for equals make_item's spec for random images; videos refused alike") {
  for (const KeyValues& extra :
       {KeyValues{}, KeyValues{{"outputs", "[pooled, last_hidden_state]"}}}) {
    CAPTURE(extra.size());
    encgraph::Runtime rt(config(extra));
    CHECK(rt.has_spec_for_desc());
    encgraph::test::SpecForRange range;
    range.max_side = 120;
    const encgraph::test::SpecForTally t = encgraph::test::check_spec_for(rt, 41, 50, range);
    CHECK(t.agreed > 15);
    CHECK(t.refused > 15);  // every video, and the bad geometries
  }
}

TEST_CASE("NaN in padded pixel rows, output and workspace never reaches real rows (ABI)") {
  KeyValues kv = siglip_ref::plugin_config(fixture().cfg);
  kv.emplace_back("seed", "5");
  const auto images = descs({0, 1});
  for (const char* output : {"last_hidden_state", "pooled"}) {
    CAPTURE(output);
    const KeyValues mode = with(kv, {{"output", output}});
    const auto clean =
        siglip_test::run(siglip_test::runtime_config(mode, "cpu", "random"), images, false);
    const int64_t budget = std::string(output) == "pooled" ? 5 : 5 * fixture().cfg.tokens();
    const auto dirty =
        siglip_test::forward_with_nan_padding(siglip_test::host_ops(), mode, images, budget, 5);
    REQUIRE(dirty.size() == clean.size());
    for (size_t i = 0; i < clean.size(); ++i) {
      CHECK(siglip_test::all_finite(dirty[i]));
      CHECK(rel_error(dirty[i], clean[i]) < 1e-6);
    }
  }
}

TEST_CASE("preprocessing: bicubic resize to the model size, grey and RGBA inputs") {
  const siglip_ref::Config& c = fixture().cfg;
  const int64_t h = 50, w = 37;
  const std::vector<uint8_t> rgb = siglip_ref::random_pixels(h, w, 3, 77);
  std::vector<uint8_t> resized = encoder_kit::image::resize(rgb.data(), h, w, 3, c.image, c.image,
                                                            encoder_kit::image::Filter::Bicubic);
  const siglip_ref::Outputs want = siglip_ref::forward(c, fixture().params, resized);
  std::vector<uint8_t> rgba, grey, grey_as_rgb;
  for (int64_t i = 0; i < h * w; ++i) {
    for (int ch = 0; ch < 3; ++ch) rgba.push_back(rgb[i * 3 + ch]);
    rgba.push_back(static_cast<uint8_t>(i * 7));  // alpha is ignored
    grey.push_back(rgb[i * 3]);
    for (int ch = 0; ch < 3; ++ch) grey_as_rgb.push_back(rgb[i * 3]);
  }
  const auto got = siglip_test::run(
      config(),
      {siglip_test::pixel_item(rgb, h, w), siglip_test::pixel_item(rgba, h, w, 4),
       siglip_test::pixel_item(grey, h, w, 1), siglip_test::pixel_item(grey_as_rgb, h, w)},
      false);
  CHECK(rel_error(got[0], want.last_hidden_state) < kTolerance);
  // What "the same image" means: the encoder reads identical pixel rows (RGBA
  // drops alpha; grey is replicated into three channels)...
  const KeyValues kv = siglip_ref::plugin_config(c);
  const std::vector<uint8_t> rgb_rows = staged_pixel_rows(kv, siglip_test::pixel_item(rgb, h, w));
  const std::vector<uint8_t> grey_rows =
      staged_pixel_rows(kv, siglip_test::pixel_item(grey, h, w, 1));
  CHECK(staged_pixel_rows(kv, siglip_test::pixel_item(rgba, h, w, 4)) == rgb_rows);
  CHECK(staged_pixel_rows(kv, siglip_test::pixel_item(grey_as_rgb, h, w)) == grey_rows);
  CHECK(grey_rows != rgb_rows);
  // ...so the embeddings agree up to the BLAS's summation order, which may
  // differ with an item's position in the batch (fp32 rounding, ~1e-7).
  CHECK(rel_error(got[1], got[0]) < kSameInput);
  CHECK(rel_error(got[3], got[2]) < kSameInput);
  CHECK(rel_error(got[2], got[0]) > 1e-3);
  // Bilinear resampling is a different image.
  const auto bilinear = siglip_test::run(config({{"resample", "bilinear"}}),
                                         {siglip_test::pixel_item(rgb, h, w)}, false);
  CHECK(rel_error(bilinear[0], got[0]) > 1e-3);
}

TEST_CASE("VLM checkpoints: another prefix, shards, no head and no last layer") {
  auto& f = fixture();
  const siglip_ref::Config& c = f.cfg;
  const std::string prefix = "model.vision_tower.vision_model.";
  const std::string last = "encoder.layers." + std::to_string(c.layers - 1) + ".";
  // Two shards and an index, without the head, post_layernorm and the last
  // layer: what a LLaVA-style checkpoint taking feature layer -2 may hold.
  std::set<std::string> shard1, shard2, dropped;
  for (const auto& [name, v] : f.params) {
    if (name.rfind("head.", 0) == 0 || name.rfind("post_layernorm", 0) == 0 ||
        name.rfind(last, 0) == 0)
      dropped.insert(name);
    else
      (name.rfind("encoder.layers.0.", 0) == 0 ? shard2 : shard1).insert(name);
  }
  siglip_test::TempDir dir("siglip-vlm");
  auto skip = [&](const std::set<std::string>& keep) {
    std::set<std::string> s;
    for (const auto& [name, v] : f.params)
      if (!keep.count(name)) s.insert(name);
    return s;
  };
  siglip_ref::write_params(c, f.params, dir.path() / "model-00001-of-00002.safetensors", prefix,
                           skip(shard1));
  siglip_ref::write_params(c, f.params, dir.path() / "model-00002-of-00002.safetensors", prefix,
                           skip(shard2));
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  bool first = true;
  for (const auto& [name, file] : {std::pair{&shard1, "model-00001-of-00002.safetensors"},
                                   std::pair{&shard2, "model-00002-of-00002.safetensors"}})
    for (const std::string& n : *name) {
      index += (first ? "\"" : ", \"") + prefix + n + "\": \"" + file + "\"";
      first = false;
    }
  std::ofstream(dir.path() / "model.safetensors.index.json") << index << "}}";

  KeyValues kv = with(siglip_ref::plugin_config(c), {{"weight_prefix", prefix}});
  const std::vector<size_t> which = {0, 3};
  const size_t feature = static_cast<size_t>(c.layers - 1);
  check_against(
      siglip_test::run(siglip_test::runtime_config(with(kv, {{"feature_layer", "-2"}}), "cpu",
                                                   dir.path().string()),
                       descs(which), false),
      which, [&](const siglip_ref::Outputs& o) -> const auto& { return o.hidden_states[feature]; });
  // The full output needs tensors the checkpoint lacks: the error names one.
  const std::string e = message_of(
      [&] { encgraph::Runtime rt(siglip_test::runtime_config(kv, "cpu", dir.path().string())); });
  CHECK(e.find(prefix + last) != std::string::npos);
  // The default prefix does not match this checkpoint.
  CHECK(message_of([&] {
          encgraph::Runtime rt(siglip_test::runtime_config(
              with(siglip_ref::plugin_config(c), {{"feature_layer", "-2"}}), "cpu",
              dir.path().string()));
        }).find("vision_model.embeddings") != std::string::npos);
}

TEST_CASE("config_json gives the dimensions; keys override it") {
  siglip_test::TempDir dir("siglip-json");
  const std::string path = (dir.path() / "config.json").string();
  std::ofstream(path) << R"({"model_type": "siglip", "vision_config": {"hidden_size": 32,
    "intermediate_size": 48, "num_attention_heads": 4, "num_hidden_layers": 3,
    "image_size": 26, "patch_size": 6, "layer_norm_eps": 1e-06,
    "hidden_act": "gelu_pytorch_tanh"}, "text_config": {"hidden_size": 999}})";
  const std::vector<size_t> which = {2};
  check_against(siglip_test::run(
                    siglip_test::runtime_config({{"config_json", path}}, "cpu", fixture().weights),
                    descs(which), false),
                which, last);
  // Defaults are SiglipVisionConfig's (base-patch16-224): 196 tokens of 768.
  encgraph::Runtime rt(siglip_test::runtime_config({{"num_hidden_layers", "1"}}, "cpu", "random"));
  CHECK(rt.model_info().out_hidden_size == 768);
  CHECK(rt.plan().token_budgets.front() == 196);
}

TEST_CASE("configuration and item errors say what to fix") {
  auto rc = [](const KeyValues& extra) { return config(extra); };
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"colour", "red"}}));
        }).find("unknown config key 'colour'") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"feature_layer", "-5"}}));
        }).find("feature_layer -5 is outside [-4, 3]") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"output", "pooled"}, {"feature_layer", "-2"}}));
        }).find("cannot be combined with feature_layer") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"output", "cls"}}));
        }).find("output 'cls'") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"output", "pooled"}, {"outputs", "[pooled]"}}));
        }).find("both `output` and `outputs` are set") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"outputs", "[pooled, pooler_output]"}}));
        }).find("lists \"pooled\" twice") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"outputs", "[]"}}));
        }).find("outputs is empty") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"outputs", "[last_hidden_state, cls]"}}));
        }).find("outputs entry 'cls'") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(
              rc({{"outputs", "[last_hidden_state, pooled]"}, {"feature_layer", "-2"}}));
        }).find("cannot be combined with feature_layer") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"image_size", "5"}}));
        }).find("image_size 5 is smaller than patch_size 6") != std::string::npos);
  CHECK(message_of([&] {
          encgraph::Runtime rt(rc({{"dtype", "bf16"}}));
        }).find("CPU path computes in f32") != std::string::npos);
  encgraph::Runtime rt(config());
  CHECK(message_of([&] {
          rt.make_item(encgraph::test::video(24, 24, 4, 1));
        }).find("only images") != std::string::npos);
  // A synthetic item (no pixels) is drawn at the model's size.
  const encgraph::Item item = rt.make_item(encgraph::test::image(300, 500, 9));
  CHECK(item.spec().output_tokens == fixture().cfg.tokens());
}

TEST_CASE("infinite weights are an input error naming the tensor; check_finite opts out") {
  auto& f = fixture();
  siglip_ref::Params poisoned = f.params;
  auto& w = poisoned.at("embeddings.position_embedding.weight");
  const size_t at = std::random_device{}() % w.size();  // a fresh element each run
  CAPTURE(at);
  w[at] = -INFINITY;
  const auto file = f.dir.path() / "inf.safetensors";
  siglip_ref::write_params(f.cfg, poisoned, file);
  encgraph::RuntimeConfig rc = config();
  rc.weights = file.string();
  encgraph::ErrorKind kind = encgraph::ErrorKind::Internal;
  std::string msg;
  try {
    encgraph::Runtime rt(rc);
  } catch (const encgraph::Error& e) {
    kind = e.kind();
    msg = e.what();
  }
  CHECK(kind == encgraph::ErrorKind::Input);  // the CLI's exit 2
  CHECK(msg.find("vision_model.embeddings.position_embedding.weight") != std::string::npos);
  CHECK(msg.find(file.string()) != std::string::npos);
  CHECK(msg.find("holds -Inf at element " + std::to_string(at)) != std::string::npos);
  rc.plugin_config.emplace_back("check_finite", "false");
  CHECK(message_of([&] { encgraph::Runtime rt(rc); }).empty());
}

TEST_CASE("size keys are bounded, naming the key") {
  const std::pair<const char*, const char*> bad[] = {{"image_size", "4611686018427387904"},
                                                     {"patch_size", "-1"},
                                                     {"hidden_size", "9223372036854775807"},
                                                     {"num_hidden_layers", "1000000"},
                                                     {"max_budget_images", "4294967296"}};
  for (const auto& [key, value] : bad) {
    CAPTURE(key);
    encgraph::ErrorKind kind = encgraph::ErrorKind::Internal;
    std::string msg;
    try {
      encgraph::Runtime rt(config({{key, value}}));
    } catch (const encgraph::Error& e) {
      kind = e.kind();
      msg = e.what();
    }
    CHECK(kind == encgraph::ErrorKind::Input);
    CHECK(msg.find(std::string(key) + " = " + value + " is outside [") != std::string::npos);
  }
  const std::string msg = message_of([&] {
    encgraph::Runtime rt(
        config({{"image_size", "16384"}, {"patch_size", "1"}, {"max_budget_images", "64"}}));
  });
  CHECK(msg.find("overflow the int32 sequence offsets") != std::string::npos);
}
