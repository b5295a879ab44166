// The plugin's CPU path (f32) on a tiny tower against the float64 reference:
// images, an odd-length video, window and full attention, batches through the
// runtime with graphs and eagerly, and NaN-poisoned padding at the ABI level;
// ABI 1.1: size-safe model info, path units, host-staged capture inputs, and
// frames bounded per batch; ABI 1.2: specs from descriptions (spec_for).
#include "../spec_for_checks.hpp"
#include "qwen_test_support.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>

namespace {

using qwen_test::rel_error;

constexpr double kTolerance = 1e-4;  // fp32 against float64

struct Sample {
  int64_t frames, height, width;
  std::vector<uint8_t> pixels;
  std::vector<double> expected;  // reference output rows
};

// One tiny model, its checkpoint and reference outputs, built once.
struct Fixture {
  qwen_ref::Config cfg;
  qwen_ref::Params params;
  qwen_test::TempDir dir{"qwen-cpu"};
  std::string weights;
  std::vector<Sample> samples;

  Fixture() {
    params = qwen_ref::random_params(cfg, 2024);
    weights = (dir.path() / "tiny.safetensors").string();
    qwen_ref::write_params(cfg, params, weights);
    // 3x5 units (uneven windows), 2x2, a 3-frame video (time padding), 4x3,
    // 6x2, a 2-frame video.
    const int64_t geo[][3] = {{1, 84, 140}, {1, 56, 56},  {3, 56, 84},
                              {1, 112, 84}, {1, 168, 56}, {2, 84, 84}};
    uint64_t seed = 1;
    for (const auto& g : geo) {
      Sample s{g[0], g[1], g[2], qwen_ref::random_pixels(g[0], g[1], g[2], seed++), {}};
      const qwen_ref::Input in = qwen_ref::preprocess(cfg, s.pixels, s.frames, s.height, s.width);
      s.expected = qwen_ref::forward(cfg, params, {in})[0];
      samples.push_back(std::move(s));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

std::vector<encgraph::Item> make_items(encgraph::Runtime& rt, const std::vector<size_t>& which) {
  std::vector<encgraph::Item> items;
  for (size_t k : which) {
    const Sample& s = fixture().samples[k];
    items.push_back(rt.make_item(qwen_test::pixel_item(s.pixels, s.frames, s.height, s.width)));
  }
  return items;
}

void check_against_reference(const encgraph::Result& r, const std::vector<size_t>& which) {
  REQUIRE(r.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    CAPTURE(which[i]);
    const Sample& s = fixture().samples[which[i]];
    const std::vector<float> got = r.item_as_float(i);
    CHECK(got.size() == s.expected.size());
    CHECK(rel_error(got, s.expected) < kTolerance);
  }
}

using encgraph::test::message_of;

// One instance of the plugin through its C table (the tiny model, its weights).
struct AbiInstance {
  encgraph::PluginRegistry registry{encgraph::test::plugin_dirs()};
  const eg_plugin_api* api = registry.get("qwen2_5_vl").api;
  eg_instance* inst = nullptr;
  eg_error err{};

  AbiInstance() {
    const auto kv = qwen_ref::plugin_config(fixture().cfg);
    std::vector<eg_config_entry> entries;
    for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
    eg_create_params p{};
    p.struct_size = sizeof(p);
    p.device = EG_DEVICE_CPU;
    p.weights = fixture().weights.c_str();
    p.config = entries.data();
    p.num_config = static_cast<int64_t>(entries.size());
    REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  }
  ~AbiInstance() {
    if (inst) api->destroy(inst);
  }
  AbiInstance(const AbiInstance&) = delete;
  AbiInstance& operator=(const AbiInstance&) = delete;
  eg_model_info info() {
    eg_model_info mi{};
    mi.struct_size = sizeof(mi);
    REQUIRE_MESSAGE(api->model_info(inst, &mi, &err) == EG_OK, err.message);
    return mi;
  }
};

}  // namespace

TEST_CASE("each item alone matches the float64 reference") {
  auto& f = fixture();
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  CHECK(rt.model_info().out_hidden_size == f.cfg.out);
  for (size_t k = 0; k < f.samples.size(); ++k) {
    auto items = make_items(rt, {k});
    const Sample& s = f.samples[k];
    CHECK(items[0].spec().output_tokens == ((s.frames + 1) / 2) * (s.height / 28) * (s.width / 28));
    check_against_reference(rt.execute(items), {k});
  }
}

TEST_CASE("a mixed batch through captured graphs matches the reference") {
  auto& f = fixture();
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.budgets.token_budgets = {16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  encgraph::Runtime rt(rc);
  rt.capture();
  CHECK(rt.is_captured());
  const std::vector<size_t> order = {2, 0, 5, 1, 4, 3, 1, 2};
  auto items = make_items(rt, order);
  check_against_reference(rt.execute(items), order);
  const encgraph::Stats st = rt.stats();
  CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
  CHECK(st.padded_token_efficiency < 1.0);  // some batches were padded
  // The same items again, one call per item, replay the smaller graphs.
  for (size_t k : {1u, 5u}) check_against_reference(rt.execute(make_items(rt, {k})), {k});
}

TEST_CASE("an eager mixed batch matches the reference") {
  auto& f = fixture();
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.use_graphs = false;
  rc.budgets.token_budgets = {64};
  rc.budgets.max_items_per_batch = 6;
  encgraph::Runtime rt(rc);
  const std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
  check_against_reference(rt.execute(make_items(rt, order)), order);
}

TEST_CASE("NaN in padded rows, workspace and output never reaches real rows") {
  auto& f = fixture();
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("qwen2_5_vl").api;
  const auto kv = qwen_ref::plugin_config(f.cfg);
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

  const std::vector<size_t> which = {2, 1};  // 16 tokens in a budget of 32
  std::vector<eg_item*> items;
  for (size_t k : which) {
    const Sample& s = f.samples[k];
    const eg_item_desc d = qwen_test::pixel_item(s.pixels, s.frames, s.height, s.width);
    eg_item* it = nullptr;
    REQUIRE(api->item_create(inst, &d, &it, &err) == EG_OK);
    items.push_back(it);
  }
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
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
  // The runtime's padding for the tables; pixel and rotary padding stays NaN.
  for (int b = 0; b < info.num_buffers; ++b) {
    auto* v = static_cast<int32_t*>(buffers[b].data);
    const int64_t rows = replay[b].rows, cap = buffers[b].shape[0];
    if (info.buffers[b].padding_logic == EG_PAD_REPEAT_LAST)
      for (int64_t r = rows; r < cap; ++r) v[r] = v[rows - 1];
    else if (info.buffers[b].dtype == EG_DTYPE_I32)
      for (int64_t r = rows; r < cap; ++r) v[r] = 0;
  }
  CHECK(replay[0].rows == 16 * 4);
  eg_tensor out_shape{};
  REQUIRE(api->output_shape(inst, &shape, &out_shape, &err) == EG_OK);
  std::vector<float> output(static_cast<size_t>(out_shape.shape[0] * out_shape.shape[1]),
                            std::numeric_limits<float>::quiet_NaN());
  size_t ws = 0;
  REQUIRE(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  std::vector<float> workspace(ws / 4 + 64, std::numeric_limits<float>::quiet_NaN());
  eg_forward_args args{};
  args.shape = shape;
  args.buffers = buffers.data();
  args.num_buffers = info.num_buffers;
  args.output = out_shape;
  args.output.data = output.data();
  args.workspace = workspace.data();
  args.workspace_size = ws;
  REQUIRE_MESSAGE(api->forward(inst, &args, &err) == EG_OK, err.message);
  size_t row = 0;
  for (size_t k : which) {
    const std::vector<double>& want = f.samples[k].expected;
    const std::vector<float> got(output.begin() + row, output.begin() + row + want.size());
    CHECK(qwen_test::all_finite(got));
    CHECK(rel_error(got, want) < kTolerance);
    row += want.size();
  }
  for (eg_item* it : items) api->item_destroy(inst, it);
}

TEST_CASE("config_json's vision_config gives the same model as explicit keys") {
  auto& f = fixture();
  const auto json = f.dir.path() / "config.json";
  {
    std::ofstream out(json);
    out << R"({"model_type": "qwen2_5_vl", "vision_config": {"depth": 4, "hidden_act": "silu",
      "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "in_chans": 3,
      "out_hidden_size": 48, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
      "window_size": 56, "fullatt_block_indexes": [2], "tokens_per_second": 2,
      "temporal_patch_size": 2}})";
  }
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.plugin_config = {{"config_json", json.string()}};
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);
  check_against_reference(rt.execute(make_items(rt, {0, 2})), {0, 2});
}

TEST_CASE("checkpoint problems are errors naming the tensor and the file") {
  auto& f = fixture();
  qwen_ref::Params missing = f.params;
  missing.erase("visual.blocks.1.mlp.up_proj.bias");
  const auto file = f.dir.path() / "missing.safetensors";
  qwen_ref::write_params(f.cfg, missing, file);
  std::string msg = message_of(
      [&] { encgraph::Runtime rt(qwen_test::runtime_config(f.cfg, "cpu", file.string())); });
  CHECK(msg.find("visual.blocks.1.mlp.up_proj.bias") != std::string::npos);
  CHECK(msg.find(file.string()) != std::string::npos);

  qwen_ref::Config wider = f.cfg;
  wider.inter = 80;
  msg =
      message_of([&] { encgraph::Runtime rt(qwen_test::runtime_config(wider, "cpu", f.weights)); });
  CHECK(msg.find("visual.blocks.0.mlp.gate_proj.weight") != std::string::npos);
  CHECK(msg.find("[96, 64]") != std::string::npos);
  CHECK(msg.find("[80, 64]") != std::string::npos);

  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.plugin_config.emplace_back("window_sise", "112");
  msg = message_of([&] { encgraph::Runtime rt(rc); });
  CHECK(msg.find("window_sise") != std::string::npos);
}

TEST_CASE("random weights and synthetic items are reproducible from their seeds") {
  auto& f = fixture();
  auto run = [&](const std::string& seed, uint64_t item_seed) {
    encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", "random");
    rc.plugin_config.emplace_back("seed", seed);
    rc.use_graphs = false;
    encgraph::Runtime rt(rc);
    std::vector<encgraph::Item> items;
    items.push_back(rt.make_item(encgraph::test::image(60, 90, item_seed)));
    items.push_back(rt.make_item(encgraph::test::video(56, 56, 4, item_seed + 1)));
    const encgraph::Result r = rt.execute(items);
    std::vector<float> all = r.item_as_float(0);
    const std::vector<float> second = r.item_as_float(1);
    all.insert(all.end(), second.begin(), second.end());
    CHECK(qwen_test::all_finite(all));
    return all;
  };
  const auto a = run("5", 1);
  CHECK(a == run("5", 1));
  CHECK(a != run("6", 1));
  CHECK(a != run("5", 2));
}

TEST_CASE("items are validated") {
  auto& f = fixture();
  encgraph::Runtime rt(qwen_test::runtime_config(f.cfg, "cpu", f.weights));
  eg_item_desc bad = encgraph::test::image(56, 56, 1);
  bad.frames = 2;
  CHECK_THROWS_AS(rt.make_item(bad), encgraph::Error);
  CHECK_THROWS_AS(rt.make_item(encgraph::test::image(10, 5000, 1)), encgraph::Error);  // aspect
  const encgraph::Item v = rt.make_item(encgraph::test::video(56, 84, 5, 3));
  CHECK(v.spec().output_tokens == 3 * 2 * 3);  // grid_t = ceil(5 / 2)
  CHECK(v.spec().frames == 5);
  // input_size: the forward's work in patch-equivalents, at least the 72
  // patches; attention stays within each temporal patch, so 3 of them cost 3
  // times one (an image of the same size), up to rounding.
  const encgraph::Item one = rt.make_item(encgraph::test::image(56, 84, 3));
  REQUIRE(one.spec().output_tokens == 2 * 3);
  CHECK(v.spec().input_size >= 3 * 4 * 6);
  CHECK(std::abs(v.spec().input_size - 3 * one.spec().input_size) <= 2);
}

TEST_CASE("NaN or infinite weights are an input error naming the tensor; check_finite opts out") {
  auto& f = fixture();
  qwen_ref::Params poisoned = f.params;
  auto& w = poisoned.at("visual.blocks.1.attn.proj.weight");
  const size_t at = std::random_device{}() % w.size();  // a fresh element each run
  CAPTURE(at);
  w[at] = std::numeric_limits<double>::quiet_NaN();
  const auto file = f.dir.path() / "nan.safetensors";
  qwen_ref::write_params(f.cfg, poisoned, file);
  encgraph::ErrorKind kind = encgraph::ErrorKind::Internal;
  std::string msg;
  try {
    encgraph::Runtime rt(qwen_test::runtime_config(f.cfg, "cpu", file.string()));
  } catch (const encgraph::Error& e) {
    kind = e.kind();
    msg = e.what();
  }
  CHECK(kind == encgraph::ErrorKind::Input);  // the CLI's exit 2
  CHECK(msg.find("visual.blocks.1.attn.proj.weight") != std::string::npos);
  CHECK(msg.find(file.string()) != std::string::npos);
  CHECK(msg.find("holds NaN at element " + std::to_string(at)) != std::string::npos);
  CHECK(msg.find("check_finite = false") != std::string::npos);

  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", file.string());
  rc.plugin_config.emplace_back("check_finite", "false");
  rc.use_graphs = false;
  encgraph::Runtime rt(rc);  // loads: the user asked for it
  CHECK_FALSE(qwen_test::all_finite(rt.execute(make_items(rt, {1})).item_as_float(0)));
}

TEST_CASE("size keys are bounded, naming the key, before any product is formed") {
  auto& f = fixture();
  const std::pair<const char*, const char*> bad[] = {
      {"patch_size", "4611686018427387904"}, {"window_size", "4611686018427387904"},
      {"spatial_merge_size", "-3"},          {"depth", "100000"},
      {"hidden_size", "1099511627776"},      {"temporal_patch_size", "0"},
      {"max_pixels", "9223372036854775807"}, {"max_frames_per_video", "4294967296"},
      {"max_budget", "4611686018427387904"}, {"intermediate_size", "9223372036854775807"}};
  for (const auto& [key, value] : bad) {
    CAPTURE(key);
    encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", "random");
    for (auto& kv : rc.plugin_config)
      if (kv.first == key) kv.second = value;
    if (std::none_of(rc.plugin_config.begin(), rc.plugin_config.end(),
                     [&](const auto& kv) { return kv.first == key; }))
      rc.plugin_config.emplace_back(key, value);
    encgraph::ErrorKind kind = encgraph::ErrorKind::Internal;
    std::string msg;
    try {
      encgraph::Runtime rt(rc);
    } catch (const encgraph::Error& e) {
      kind = e.kind();
      msg = e.what();
    }
    CHECK(kind == encgraph::ErrorKind::Input);
    CHECK(msg.find(std::string(key) + " = " + value + " is outside [") != std::string::npos);
  }
  // A tower too large for the machine is named before anything is allocated.
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", "random");
  rc.plugin_config = {{"depth", "1024"},
                      {"hidden_size", "65536"},
                      {"num_heads", "1024"},
                      {"intermediate_size", "262144"},
                      {"fullatt_block_indexes", "[0]"},
                      {"window_size", "112"}};
  const std::string msg = message_of([&] { encgraph::Runtime rt(rc); });
  CHECK(msg.find("more than this machine's") != std::string::npos);
}

TEST_CASE("mlp_kernel and qkv_kernel take their values; anything else names the key") {
  auto& f = fixture();
  struct Key {
    const char* name;
    std::vector<const char*> values;
  };
  for (const Key& key : {Key{"mlp_kernel", {"auto", "fused_norm", "fused", "cublaslt"}},
                         Key{"qkv_kernel", {"auto", "fused_norm", "cublaslt"}}}) {
    CAPTURE(key.name);
    encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", "random");
    rc.plugin_config.emplace_back(key.name, "fast");
    const std::string msg = message_of([&] { encgraph::Runtime rt(rc); });
    CHECK(msg.find("[plugin.config] " + std::string(key.name) + " = 'fast' is not one of") !=
          std::string::npos);
    // The CPU path has one form of each: every valid value gives the same model.
    for (const char* v : key.values) {
      CAPTURE(v);
      rc.plugin_config.back().second = v;
      CHECK_NOTHROW(encgraph::Runtime{rc});
    }
  }
}

TEST_CASE("precision: bf16 or fp8_linear; fp8_linear is refused on the CPU, naming the fix") {
  auto& f = fixture();
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", "random");
  rc.plugin_config.emplace_back("precision", "fp8");
  std::string msg = message_of([&] { encgraph::Runtime rt(rc); });
  CHECK(msg.find("[plugin.config] precision = 'fp8' is not one of bf16, fp8_linear") !=
        std::string::npos);
  rc.plugin_config.back().second = "fp8_linear";
  msg = message_of([&] { encgraph::Runtime rt(rc); });
  CHECK(msg.find("precision = \"fp8_linear\" runs on CUDA only") != std::string::npos);
  CHECK(msg.find("set device = \"cuda\"") != std::string::npos);
  rc.plugin_config.back().second = "bf16";
  CHECK_NOTHROW(encgraph::Runtime{rc});
}

TEST_CASE("ABI 1.1: model info stops at the runtime's struct_size; units and path tokens") {
  AbiInstance a;
  CHECK(a.api->abi_minor == EG_ABI_VERSION_MINOR);
  CHECK(a.api->struct_size == EG_PLUGIN_API_V1_4_SIZE);
  CHECK(!a.api->prepare_capture_inputs);  // host-staged capture instead
  CHECK(static_cast<bool>(a.api->prepare_capture_staging));
  // A 1.0-sized struct: nothing past its end is touched.
  std::vector<uint8_t> bytes(sizeof(eg_model_info), 0xAB);
  auto* small = reinterpret_cast<eg_model_info*>(bytes.data());
  small->struct_size = EG_MODEL_INFO_V1_0_SIZE;
  REQUIRE_MESSAGE(a.api->model_info(a.inst, small, &a.err) == EG_OK, a.err.message);
  CHECK(small->num_paths == 1);
  CHECK(small->out_hidden_size == fixture().cfg.out);
  CHECK(std::all_of(bytes.begin() + EG_MODEL_INFO_V1_0_SIZE, bytes.end(),
                    [](uint8_t b) { return b == 0xAB; }));
  // A struct_size below 1.0's is refused, not overrun.
  eg_model_info tiny{};
  tiny.struct_size = 16;
  CHECK(a.api->model_info(a.inst, &tiny, &a.err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(std::string(a.err.message).find("struct_size") != std::string::npos);
  // The full struct: the path's unit; budgets count merged tokens.
  const eg_model_info mi = a.info();
  REQUIRE(mi.path_units[0] != nullptr);
  CHECK(std::string(mi.path_units[0]) == "merged tokens");
  const Sample& s = fixture().samples[2];  // a 3-frame video
  const eg_item_desc d = qwen_test::pixel_item(s.pixels, s.frames, s.height, s.width);
  eg_item* it = nullptr;
  REQUIRE(a.api->item_create(a.inst, &d, &it, &a.err) == EG_OK);
  eg_item_spec spec{};
  REQUIRE(a.api->item_spec(a.inst, it, &spec, &a.err) == EG_OK);
  CHECK(spec.path_tokens[0] == spec.output_tokens);
  CHECK(spec.input_size >= 4 * spec.output_tokens);  // patch-equivalents, attention added
  CHECK(spec.frames == 3);
  a.api->item_destroy(a.inst, it);
}

TEST_CASE("ABI 1.2: spec_for equals make_item's spec for random images and videos") {
  // Pixels through item_create, none through item_spec_for_desc: the resize,
  // the temporal grid and every refusal must agree.
  encgraph::Runtime rt(qwen_test::runtime_config(qwen_ref::Config{}, "cpu", "random"));
  CHECK(rt.has_spec_for_desc());
  encgraph::test::SpecForRange range;
  range.max_side = 180;
  const encgraph::test::SpecForTally t = encgraph::test::check_spec_for(rt, 25, 60, range);
  CHECK(t.agreed > 30);
  CHECK(t.refused > 3);
  // A very thin image: the processor's aspect-ratio limit refuses it in both.
  const eg_item_desc thin = encgraph::test::image(10, 5000, 1);
  const std::string made = message_of([&] { rt.make_item(thin); });
  const std::string asked = message_of([&] { rt.spec_for(thin); });
  CHECK(asked.find("plugin 'qwen2_5_vl': item_spec_for_desc failed (invalid argument)") !=
        std::string::npos);
  CHECK(made.substr(made.find("): ")) == asked.substr(asked.find("): ")));
}

TEST_CASE("capture staging: valid tables in host staging, a finite warm-up forward") {
  AbiInstance a;
  const eg_model_info info = a.info();
  eg_graph_shape shape{};
  shape.token_budget = 64;
  shape.max_batch_size = 4;
  shape.max_frames_per_batch = 6;
  const auto n = static_cast<size_t>(info.num_buffers);
  std::vector<std::vector<uint8_t>> memory(n);
  std::vector<eg_tensor> buffers(n);
  std::vector<eg_replay_buffer> staging(n);
  for (size_t b = 0; b < n; ++b) {
    const int32_t bi = static_cast<int32_t>(b);
    REQUIRE(a.api->buffer_shape(a.inst, &shape, bi, &buffers[b], &a.err) == EG_OK);
    buffers[b].dtype = info.buffers[b].dtype;
    buffers[b].device = EG_DEVICE_CPU;
    size_t bytes = 4;
    for (int d = 0; d < buffers[b].ndim; ++d) bytes *= static_cast<size_t>(buffers[b].shape[d]);
    memory[b].assign(bytes, 0);  // the runtime hands over zeroed staging
    buffers[b].data = memory[b].data();
    staging[b].staging = buffers[b];
    staging[b].rows = -2;  // must be overwritten
  }
  REQUIRE_MESSAGE(a.api->prepare_capture_staging(a.inst, &shape, staging.data(), info.num_buffers,
                                                 &a.err) == EG_OK,
                  a.err.message);
  const int64_t patches = buffers[0].shape[0];
  for (size_t b = 0; b < n; ++b) {
    CAPTURE(info.buffers[b].name);
    if (info.buffers[b].dtype != EG_DTYPE_I32) {
      CHECK(staging[b].rows == -1);  // pixel and rotary rows stay zero
      continue;
    }
    CHECK(staging[b].rows == buffers[b].shape[0]);  // every entry of a table
    const auto* v = static_cast<const int32_t*>(buffers[b].data);
    const std::string name = info.buffers[b].name;
    if (name == "inverse_window_index") {
      for (int64_t r = 0; r < buffers[b].shape[0]; ++r) CHECK(v[r] == r);
    } else {
      CHECK(v[0] == 0);
      for (int64_t r = 1; r < buffers[b].shape[0]; ++r) {
        CHECK(v[r] >= v[r - 1]);
        CHECK(v[r] <= patches);
      }
      CHECK(v[buffers[b].shape[0] - 1] == patches);  // the warm-up covers every row
    }
  }
  // The frame table is sized by max_frames_per_batch: 6 frames of at most 4
  // items make at most (6 + 4) / 2 = 5 temporal sequences.
  for (size_t b = 0; b < n; ++b)
    if (std::string(info.buffers[b].name) == "cu_seqlens") CHECK(buffers[b].shape[0] == 5 + 1);
  eg_tensor out{};
  REQUIRE(a.api->output_shape(a.inst, &shape, &out, &a.err) == EG_OK);
  std::vector<float> output(static_cast<size_t>(out.shape[0] * out.shape[1]),
                            std::numeric_limits<float>::quiet_NaN());
  size_t ws = 0;
  REQUIRE(a.api->workspace_size(a.inst, &shape, &ws, &a.err) == EG_OK);
  std::vector<float> workspace(ws / 4 + 64, std::numeric_limits<float>::quiet_NaN());
  eg_forward_args args{};
  args.shape = shape;
  args.buffers = buffers.data();
  args.num_buffers = info.num_buffers;
  args.struct_size = sizeof(args);
  args.output = out;
  args.output.data = output.data();
  args.outputs = &args.output;
  args.num_outputs = 1;
  args.workspace = workspace.data();
  args.workspace_size = ws;
  REQUIRE_MESSAGE(a.api->forward(a.inst, &args, &a.err) == EG_OK, a.err.message);
  CHECK(qwen_test::all_finite(output));
}

TEST_CASE("many short videos in one request: frames bound each batch, replays equal eager") {
  auto& f = fixture();
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  rc.budgets.token_budgets = {32, 64};
  rc.budgets.max_items_per_batch = 8;
  rc.budgets.max_frames_per_batch = 5;
  rc.poison_memory = true;  // NaN output and workspace before every run
  // Videos of 3 and 2 frames and images: 18 frames, so at least 4 batches.
  const std::vector<size_t> order = {2, 5, 2, 0, 5, 1, 2, 5, 3};
  int64_t frames = 0;
  for (size_t k : order) frames += f.samples[k].frames;
  REQUIRE(frames == 18);
  encgraph::Runtime rt(rc);
  CHECK(rt.plan().max_frames_per_batch == 5);
  rt.capture();
  const encgraph::Result r = rt.execute(make_items(rt, order));
  check_against_reference(r, order);
  const encgraph::Stats st = rt.stats();
  CHECK(st.graph_hits == static_cast<int64_t>(order.size()));
  CHECK(st.batches_eager == 0);
  CHECK(st.batches_graph >= (frames + 4) / 5);
  // Each item alone, eagerly, gives the rows its batch replay gave.
  encgraph::RuntimeConfig eager = qwen_test::runtime_config(f.cfg, "cpu", f.weights);
  eager.use_graphs = false;
  encgraph::Runtime alone(eager);
  for (size_t i = 0; i < order.size(); ++i) {
    CAPTURE(i);
    const encgraph::Result one = alone.execute(make_items(alone, {order[i]}));
    CHECK(rel_error(r.item_as_float(i), one.item_as_float(0)) < 1e-5);
  }
}
