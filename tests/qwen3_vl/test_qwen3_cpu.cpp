// The qwen3_vl plugin's CPU path (f32) on a tiny tower against the float64
// reference: images of odd grids, videos with an odd frame count, all four
// outputs (pooler_output and three deepstack features, merger order not the
// layer order), batches through captured graphs and eagerly, a
// `model.visual.` checkpoint, NaN-poisoned padding at the ABI level, and
// specs from descriptions (ABI 1.2).
#include "../plugin_test_support.hpp"
#include "../spec_for_checks.hpp"
#include "../test_support.hpp"
#include "qwen3_reference.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <memory>

namespace {

using encgraph::test::rel_error;

constexpr double kTolerance = 1e-4;  // fp32 against float64
constexpr size_t kOutputs = 4;

struct Sample {
  int64_t frames, height, width;
  std::vector<uint8_t> pixels;
  std::vector<std::vector<double>> expected;  // per output
};

struct Fixture {
  qwen3_ref::Config cfg;
  qwen3_ref::Params params;
  encgraph::test::TempDir dir{"qwen3-cpu"};
  std::string weights, weights_model;  // visual.* and model.visual.* checkpoints
  std::vector<Sample> samples;

  Fixture() {
    params = qwen3_ref::random_params(cfg, 2025);
    weights = (dir.path() / "tiny.safetensors").string();
    qwen3_ref::write_params(cfg, params, weights);
    weights_model = (dir.path() / "tiny-model.safetensors").string();
    qwen3_ref::write_params(cfg, qwen3_ref::random_params(cfg, 2025, "model.visual."),
                            weights_model, "model.visual.");
    // Sides are multiples of 32 inside the pixel bounds, so no resize: 2x3
    // units, 3x2, a 3-frame video (time padding), 4x3, a 2-frame video, 2x2.
    const int64_t geo[][3] = {{1, 64, 96},  {1, 96, 64}, {3, 64, 96},
                              {1, 128, 96}, {2, 64, 64}, {1, 64, 64}};
    uint64_t seed = 1;
    for (const auto& g : geo) {
      Sample s{g[0], g[1], g[2], qwen3_ref::random_pixels(g[0], g[1], g[2], seed++), {}};
      const auto in = qwen3_ref::preprocess(cfg, s.pixels, s.frames, s.height, s.width);
      for (auto& o : qwen3_ref::forward(cfg, params, {in})) s.expected.push_back(o[0]);
      samples.push_back(std::move(s));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

encgraph::RuntimeConfig runtime_config(const std::string& weights) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "qwen3_vl";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = "cpu";
  rc.weights = weights;
  rc.plugin_config = qwen3_ref::plugin_config(fixture().cfg);
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;
  return rc;
}

eg_item_desc pixel_item(const Sample& s) {
  eg_item_desc d{};
  d.modality = s.frames > 1 ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = s.height;
  d.width = s.width;
  d.frames = s.frames;
  d.pixels = s.pixels.data();
  return d;
}

std::vector<encgraph::Item> make_items(encgraph::Runtime& rt, const std::vector<size_t>& which) {
  std::vector<encgraph::Item> items;
  for (size_t k : which) items.push_back(rt.make_item(pixel_item(fixture().samples[k])));
  return items;
}

void check_against_reference(const encgraph::Result& r, const std::vector<size_t>& which) {
  REQUIRE(r.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i)
    for (size_t o = 0; o < kOutputs; ++o) {
      CAPTURE(which[i]);
      CAPTURE(o);
      const std::vector<float> got = r.item_as_float(i, o);
      CHECK(rel_error(got, fixture().samples[which[i]].expected[o]) < kTolerance);
    }
}

}  // namespace

TEST_CASE("the reference's outputs differ from each other (the test can fail)") {
  const Sample& s = fixture().samples[0];
  REQUIRE(s.expected.size() == kOutputs);
  for (size_t o = 1; o < kOutputs; ++o) {
    const std::vector<float> a(s.expected[o].begin(), s.expected[o].end());
    CHECK(rel_error(a, s.expected[0]) > 0.1);
  }
}

TEST_CASE("each item alone, eagerly, matches the float64 reference on all four outputs") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().weights);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  CHECK(rt.model_info().out_hidden_size == fixture().cfg.out);
  for (size_t k = 0; k < fixture().samples.size(); ++k) {
    auto items = make_items(rt, {k});
    const Sample& s = fixture().samples[k];
    CHECK(items[0].spec().output_tokens == ((s.frames + 1) / 2) * (s.height / 32) * (s.width / 32));
    check_against_reference(rt.execute(items), {k});
  }
}

TEST_CASE("a mixed batch through captured graphs matches the reference") {
  encgraph::RuntimeConfig rc = runtime_config(fixture().weights);
  rc.budgets.token_budgets = {8, 16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  encgraph::Runtime rt(rc);
  rt.capture();
  CHECK(rt.is_captured());
  const std::vector<size_t> order = {2, 0, 5, 1, 4, 3, 1, 2};
  check_against_reference(rt.execute(make_items(rt, order)), order);
  const encgraph::Stats st = rt.stats();
  CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
  CHECK(st.padded_token_efficiency < 1.0);
}

TEST_CASE("an eager mixed batch and a model.visual. checkpoint match the reference") {
  for (const std::string& w : {fixture().weights, fixture().weights_model}) {
    CAPTURE(w);
    encgraph::RuntimeConfig rc = runtime_config(w);
    rc.use_graphs = false;
    rc.budgets.token_budgets = {64};
    rc.budgets.max_items_per_batch = 6;
    encgraph::Runtime rt(rc);
    const std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
    check_against_reference(rt.execute(make_items(rt, order)), order);
  }
}

TEST_CASE("NaN in padded rows, workspace and outputs never reaches real rows") {
  auto& f = fixture();
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("qwen3_vl").api;
  const auto kv = qwen3_ref::plugin_config(f.cfg);
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CPU;
  p.weights = f.weights.c_str();
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> guard(inst, api->destroy);

  const std::vector<size_t> which = {2, 5};  // 12 + 4 tokens in a budget of 32
  std::vector<eg_item*> items;
  for (size_t k : which) {
    const eg_item_desc d = pixel_item(f.samples[k]);
    eg_item* it = nullptr;
    REQUIRE(api->item_create(inst, &d, &it, &err) == EG_OK);
    items.push_back(it);
  }
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  REQUIRE(info.num_outputs == static_cast<int32_t>(kOutputs));
  CHECK(std::string(info.outputs[0].name) == "pooler_output");
  CHECK(std::string(info.outputs[3].name) == "deepstack_2");
  CHECK(std::string(info.path_units[0]) == "merged tokens");
  eg_graph_shape shape{};
  shape.token_budget = 32;
  shape.max_batch_size = 4;
  std::vector<std::vector<uint8_t>> memory(info.num_buffers);
  std::vector<eg_tensor> buffers(info.num_buffers);
  std::vector<eg_replay_buffer> replay(info.num_buffers);
  for (int b = 0; b < info.num_buffers; ++b) {
    REQUIRE(api->buffer_shape(inst, &shape, b, &buffers[b], &err) == EG_OK);
    buffers[b].dtype = info.buffers[b].dtype;
    size_t bytes = 4;
    for (int d = 0; d < buffers[b].ndim; ++d) bytes *= static_cast<size_t>(buffers[b].shape[d]);
    memory[b].assign(bytes, 0xFF);  // NaN for every f32, -1 for every i32
    buffers[b].data = memory[b].data();
    replay[b].staging = buffers[b];
    replay[b].rows = -1;
  }
  std::vector<const eg_item*> citems(items.begin(), items.end());
  REQUIRE(api->prepare_replay_buffers(inst, &shape, citems.data(), 2, replay.data(),
                                      info.num_buffers, &err) == EG_OK);
  // The runtime's padding of the integer tables; f32 padding stays NaN.
  for (int b = 0; b < info.num_buffers; ++b) {
    if (info.buffers[b].dtype != EG_DTYPE_I32) continue;
    const int64_t per_row = buffers[b].ndim == 2 ? buffers[b].shape[1] : 1;
    auto* v = static_cast<int32_t*>(buffers[b].data);
    const int64_t rows = replay[b].rows, cap = buffers[b].shape[0];
    for (int64_t r = rows * per_row; r < cap * per_row; ++r)
      v[r] = info.buffers[b].padding_logic == EG_PAD_REPEAT_LAST ? v[rows - 1] : 0;
  }
  CHECK(replay[0].rows == 16 * 4);
  std::vector<std::vector<float>> outputs(kOutputs);
  std::vector<eg_tensor> out_tensors(kOutputs);
  for (size_t o = 0; o < kOutputs; ++o) {
    REQUIRE(api->output_shape_at(inst, &shape, static_cast<int32_t>(o), &out_tensors[o], &err) ==
            EG_OK);
    outputs[o].assign(static_cast<size_t>(out_tensors[o].shape[0] * out_tensors[o].shape[1]),
                      std::numeric_limits<float>::quiet_NaN());
    out_tensors[o].data = outputs[o].data();
  }
  size_t ws = 0;
  REQUIRE(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  std::vector<float> workspace(ws / 4 + 64, std::numeric_limits<float>::quiet_NaN());
  eg_forward_args args{};
  args.struct_size = sizeof(args);
  args.shape = shape;
  args.buffers = buffers.data();
  args.num_buffers = info.num_buffers;
  args.output = out_tensors[0];
  args.outputs = out_tensors.data();
  args.num_outputs = static_cast<int32_t>(kOutputs);
  args.workspace = workspace.data();
  args.workspace_size = ws;
  REQUIRE_MESSAGE(api->forward(inst, &args, &err) == EG_OK, err.message);
  for (size_t o = 0; o < kOutputs; ++o) {
    size_t row = 0;
    for (size_t k : which) {
      CAPTURE(o);
      CAPTURE(k);
      const std::vector<double>& want = f.samples[k].expected[o];
      const std::vector<float> got(
          outputs[o].begin() + static_cast<std::ptrdiff_t>(row),
          outputs[o].begin() + static_cast<std::ptrdiff_t>(row + want.size()));
      CHECK(encgraph::test::all_finite(got));
      CHECK(rel_error(got, want) < kTolerance);
      row += want.size();
    }
  }
  for (eg_item* it : items) api->item_destroy(inst, it);
}

TEST_CASE("ABI 1.2: spec_for equals make_item's spec for random images and videos") {
  // Pixels through item_create, none through item_spec_for_desc: both resize
  // rules (images, videos), the temporal grid and every refusal must agree.
  encgraph::Runtime rt(runtime_config("random"));
  CHECK(rt.has_spec_for_desc());
  encgraph::test::SpecForRange range;
  range.max_side = 180;
  const encgraph::test::SpecForTally t = encgraph::test::check_spec_for(rt, 31, 60, range);
  CHECK(t.agreed > 25);
  CHECK(t.refused > 3);  // bad geometries and one-frame videos
}

TEST_CASE("a one-frame video is refused as the video processor refuses it") {
  encgraph::Runtime rt(runtime_config(fixture().weights));
  Sample s = fixture().samples[0];
  eg_item_desc d = pixel_item(s);
  d.modality = EG_MODALITY_VIDEO;
  const std::string msg = encgraph::test::message_of([&] { rt.make_item(d); });
  CHECK(msg.find("at least temporal_patch_size") != std::string::npos);
  const std::string asked = encgraph::test::message_of([&] { rt.spec_for(d); });
  CHECK(asked.find("plugin 'qwen3_vl': item_spec_for_desc failed (invalid argument)") !=
        std::string::npos);
  CHECK(asked.find("at least temporal_patch_size") != std::string::npos);
}
