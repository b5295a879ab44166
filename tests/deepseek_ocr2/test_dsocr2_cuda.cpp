// The deepseek_ocr2 plugin's CUDA path (bf16): against the float64 reference
// on the tiny model (images with no crops and several, alone and in mixed
// batches through captured graphs on both paths), against the CPU path on a
// model with the released head widths (SAM heads of 64 with window 14 over
// zero-padded windows, the encoder's 14/2 GQA heads of 64), graph replays
// against eager runs, and NaN-poisoned memory (workspace, outputs, padded
// views) never reaching a real row. Needs a GPU: the suite's main skips
// without one (fails when ENCGRAPH_REQUIRE_GPU=1).
#include "../plugin_test_support.hpp"
#include "../test_support.hpp"
#include "dsocr2_reference.hpp"

#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using encgraph::test::all_finite;
using encgraph::test::rel_error;

// bf16 storage through 3 SAM and 2 encoder layers, relative to the output's
// scale (the L2 norm); a wrong image or crop order gives errors near 1.
constexpr double kBf16Tolerance = 4e-2;

using Keys = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  int64_t height, width, crops;
  std::vector<uint8_t> pixels;
  std::vector<double> expected;  // [crops*9 + 16 + 1, 24]
};

struct Fixture {
  dsocr2_ref::Config cfg;
  encgraph::test::TempDir dir{"dsocr2-cuda"};
  std::string weights;
  std::vector<Sample> samples;

  Fixture() {
    const dsocr2_ref::Params params = dsocr2_ref::random_params(cfg, 2026);
    weights = (dir.path() / "release.safetensors").string();
    dsocr2_ref::write_params(cfg, params, weights);
    // (h, w, crops): small (none), 3x2, tall 1x3, wide 2x1, the tie rule 2x2,
    // one tile exactly (none), square above a tile 2x2.
    const int64_t geo[][3] = {{30, 40, 0}, {50, 70, 6}, {100, 30, 3}, {52, 100, 2},
                              {48, 60, 4}, {48, 48, 0}, {64, 64, 4}};
    uint64_t seed = 1;
    for (const auto& g : geo) {
      Sample s{g[0], g[1], g[2], dsocr2_ref::random_pixels(g[0], g[1], seed++), {}};
      const dsocr2_ref::Views v = dsocr2_ref::preprocess(cfg, s.pixels, s.height, s.width);
      REQUIRE(static_cast<int64_t>(v.crops.size()) == s.crops);
      s.expected = dsocr2_ref::image_features(cfg, params, v);
      samples.push_back(std::move(s));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

eg_item_desc desc_of(const Sample& s) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = s.height;
  d.width = s.width;
  d.frames = 1;
  d.pixels = s.pixels.data();
  return d;
}

encgraph::RuntimeConfig tiny_config(bool tuned = true) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "deepseek_ocr2";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = "cuda";
  rc.weights = fixture().weights;
  rc.plugin_config = dsocr2_ref::plugin_config(fixture().cfg);
  if (!tuned) rc.plugin_config.emplace_back("tune_gemm", "false");
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;  // hit counts must not depend on timings
  return rc;
}

std::vector<std::vector<float>> run_samples(encgraph::RuntimeConfig rc,
                                            const std::vector<size_t>& which, bool graphs,
                                            encgraph::Stats* stats = nullptr) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (size_t k : which) items.push_back(rt.make_item(desc_of(fixture().samples[k])));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i, 0));
  if (stats) *stats = rt.stats();
  return out;
}

void check_reference(const std::vector<std::vector<float>>& got, const std::vector<size_t>& which,
                     const char* what) {
  REQUIRE(got.size() == which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const Sample& s = fixture().samples[which[i]];
    const double e = rel_error(got[i], s.expected);
    MESSAGE(what << " image " << which[i] << " (" << s.crops << " crops): rel error " << e);
    CHECK(all_finite(got[i]));
    CHECK(e < kBf16Tolerance);
  }
}

void compare(const std::vector<std::vector<float>>& got,
             const std::vector<std::vector<float>>& want, double tolerance, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = rel_error(got[i], want[i]);
    MESSAGE(what << " item " << i << ": rel error " << e);
    CHECK(!got[i].empty());
    CHECK(all_finite(got[i]));
    CHECK(e < tolerance);
  }
}

// The released head widths at a small image size: SAM 768 wide, 12 heads of
// 64, window 14 over a 16x16 grid (2x2 windows, 12 rows and columns of zero
// padding), a global layer, the neck and [512, 896] downsampling, the encoder
// 896 wide with 14 query and 2 KV heads of 64 and the 4864 MLP, projector to 1280.
Keys wide_model() {
  return {{"patch_size", "16"},         {"sam_image_size", "256"},
          {"sam_hidden_size", "768"},   {"sam_layers", "2"},
          {"sam_heads", "12"},          {"sam_mlp_dim", "3072"},
          {"window_size", "14"},        {"global_attn_indexes", "[1]"},
          {"neck_channels", "256"},     {"downsample_channels", "[512, 896]"},
          {"encoder_layers", "2"},      {"encoder_heads", "14"},
          {"encoder_kv_heads", "2"},    {"encoder_intermediate_size", "4864"},
          {"text_hidden_size", "1280"}, {"global_size", "256"},
          {"tile_size", "192"},         {"seed", "5"}};
}

encgraph::RuntimeConfig wide_config(const std::string& device) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "deepseek_ocr2";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = "random";
  rc.plugin_config = wide_model();
  rc.stats_log_interval = 0;
  rc.prefer_faster_path = false;
  rc.budgets.token_budgets = {16, 36, 64, 128};  // 16 global / 9 local tokens a view
  rc.budgets.max_items_per_batch = 4;
  return rc;
}

std::vector<std::vector<float>> run_geometries(encgraph::RuntimeConfig rc,
                                               const std::vector<std::pair<int64_t, int64_t>>& hw,
                                               bool graphs, encgraph::Stats* stats = nullptr) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  uint64_t seed = 40;
  for (const auto& [h, w] : hw) items.push_back(rt.make_item(encgraph::test::image(h, w, seed++)));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i, 0));
  if (stats) *stats = rt.stats();
  return out;
}

}  // namespace

TEST_CASE("each image alone, eagerly on CUDA, matches the float64 reference") {
  for (size_t k = 0; k < fixture().samples.size(); ++k)
    check_reference(run_samples(tiny_config(), {k}, false), {k}, "cuda eager");
}

TEST_CASE("the comparison can fail: another image's reference is far") {
  const auto got = run_samples(tiny_config(), {4}, false);
  CHECK(rel_error(got[0], fixture().samples[6].expected) > 0.2);  // same shape, other pixels
}

TEST_CASE("mixed batches through captured graphs on both paths match the reference") {
  encgraph::RuntimeConfig rc = tiny_config();
  rc.budgets.token_budgets = {16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  // no-crop images between cropped ones: the local path skips them
  const std::vector<size_t> order = {0, 1, 5, 2, 3, 0, 4, 6, 5};
  encgraph::Stats st;
  const auto graphs = run_samples(rc, order, true, &st);
  check_reference(graphs, order, "cuda graphs");
  CHECK(st.graph_hits > 0);  // replayed, not only eager fallbacks
  compare(graphs, run_samples(rc, order, false), kBf16Tolerance, "graphs vs eager");
}

TEST_CASE("released head widths: CUDA graphs and eager match the CPU path") {
  // 256x256 global views (16x16 patches); 192 tiles: (h, w) with 0, 2, 3 and 6 crops.
  const std::vector<std::pair<int64_t, int64_t>> hw = {
      {150, 180}, {200, 380}, {600, 190}, {400, 300}, {120, 90}};
  const auto cpu = run_geometries(wide_config("cpu"), hw, false);
  encgraph::Stats st;
  compare(run_geometries(wide_config("cuda"), hw, true, &st), cpu, kBf16Tolerance,
          "cuda graphs vs cpu");
  CHECK(st.graph_hits > 0);
  compare(run_geometries(wide_config("cuda"), hw, false), cpu, kBf16Tolerance, "cuda eager vs cpu");
}

TEST_CASE("NaN-poisoned workspace and outputs never reach real rows (runtime)") {
  encgraph::RuntimeConfig rc = tiny_config(/*tuned=*/false);
  rc.budgets.token_budgets = {16, 32, 64};
  rc.budgets.max_items_per_batch = 4;
  const std::vector<size_t> order = {1, 0, 3, 6};
  const auto clean_graphs = run_samples(rc, order, true);
  const auto clean_eager = run_samples(rc, order, false);
  rc.poison_memory = true;
  compare(run_samples(rc, order, true), clean_graphs, 1e-30, "poisoned vs clean graphs");
  compare(run_samples(rc, order, false), clean_eager, 1e-30, "poisoned vs clean eager");
}

TEST_CASE("NaN in padded views never reaches real views (ABI, local path)") {
  const Fixture& f = fixture();
  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("deepseek_ocr2").api;
  REQUIRE((api->devices & EG_DEVICE_CUDA) != 0);
  Keys kv = dsocr2_ref::plugin_config(f.cfg);
  kv.emplace_back("tune_gemm", "false");
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CUDA;
  p.weights = f.weights.c_str();
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> guard(inst, api->destroy);
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  REQUIRE(info.num_buffers == 2);
  REQUIRE(info.buffers[0].dtype == EG_DTYPE_BF16);

  const Sample& s = f.samples[3];  // 2 crops
  const eg_item_desc d = desc_of(s);
  eg_item* item = nullptr;
  REQUIRE(api->item_create(inst, &d, &item, &err) == EG_OK);
  // 1.2: the spec from the description alone equals the made item's.
  eg_item_spec made{}, promised{};
  REQUIRE(api->item_spec(inst, item, &made, &err) == EG_OK);
  const bool has_spec_for_desc = api->item_spec_for_desc != nullptr;
  REQUIRE(has_spec_for_desc);
  REQUIRE(api->item_spec_for_desc(inst, &d, &promised, &err) == EG_OK);
  CHECK(made.output_tokens == promised.output_tokens);
  CHECK(made.path_tokens[1] == promised.path_tokens[1]);
  CHECK(made.path_tokens[1] == 2 * 9);

  eg_graph_shape shape{};
  shape.path = 1;           // local
  shape.token_budget = 45;  // 5 crops of 9 tokens: 3 padded views
  shape.max_batch_size = 4;
  std::vector<std::vector<uint8_t>> host(2);
  std::vector<eg_tensor> dev(2);
  std::vector<eg_replay_buffer> replay(2);
  std::vector<void*> allocations;
  for (int b = 0; b < 2; ++b) {
    REQUIRE(api->buffer_shape(inst, &shape, b, &dev[b], &err) == EG_OK);
    dev[b].dtype = info.buffers[b].dtype;
    dev[b].device = EG_DEVICE_CUDA;
    size_t bytes = info.buffers[b].dtype == EG_DTYPE_BF16 ? 2 : 4;
    for (int k = 0; k < dev[b].ndim; ++k) bytes *= static_cast<size_t>(dev[b].shape[k]);
    host[b].assign(bytes, 0);
    REQUIRE(cudaMalloc(&dev[b].data, bytes) == cudaSuccess);
    allocations.push_back(dev[b].data);
    replay[b].staging = dev[b];
    replay[b].staging.data = host[b].data();
    replay[b].rows = -1;
  }
  REQUIRE(dev[0].shape[0] == 5);
  const eg_item* citems[] = {item};
  REQUIRE(api->prepare_replay_buffers(inst, &shape, citems, 1, replay.data(), 2, &err) == EG_OK);
  REQUIRE(replay[0].rows == 2);
  eg_tensor out{};
  REQUIRE(api->output_shape_at(inst, &shape, 0, &out, &err) == EG_OK);
  out.dtype = EG_DTYPE_BF16;
  out.device = EG_DEVICE_CUDA;
  const size_t out_bytes = static_cast<size_t>(out.shape[0] * out.shape[1]) * 2;
  REQUIRE(cudaMalloc(&out.data, out_bytes) == cudaSuccess);
  allocations.push_back(out.data);
  size_t ws = 0;
  REQUIRE(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  void* ws_mem = nullptr;
  REQUIRE(cudaMalloc(&ws_mem, ws) == cudaSuccess);
  allocations.push_back(ws_mem);
  const size_t real_values = static_cast<size_t>(2 * 9 * f.cfg.text_hidden);
  // One forward with the padded views, outputs and scratch filled with `fill`
  // bytes (0xFF: NaN); the two real crops' rows come back as float.
  auto forward = [&](uint8_t fill) {
    std::vector<uint8_t> px = host[0];
    const size_t view_bytes = px.size() / 5;
    std::fill(px.begin() + static_cast<int64_t>(2 * view_bytes), px.end(), fill);
    REQUIRE(cudaMemcpy(dev[0].data, px.data(), px.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(dev[1].data, host[1].data(), host[1].size(), cudaMemcpyHostToDevice) ==
            cudaSuccess);
    REQUIRE(cudaMemset(out.data, fill, out_bytes) == cudaSuccess);
    REQUIRE(cudaMemset(ws_mem, fill, ws) == cudaSuccess);
    eg_forward_args args{};
    args.shape = shape;
    args.buffers = dev.data();
    args.num_buffers = 2;
    args.struct_size = sizeof(args);
    args.output = out;
    args.outputs = &out;
    args.num_outputs = 1;
    args.workspace = ws_mem;
    args.workspace_size = ws;
    REQUIRE_MESSAGE(api->forward(inst, &args, &err) == EG_OK, err.message);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<uint16_t> raw(real_values);
    REQUIRE(cudaMemcpy(raw.data(), out.data, raw.size() * 2, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    std::vector<float> v(raw.size());
    for (size_t k = 0; k < v.size(); ++k) {
      const uint32_t bits = static_cast<uint32_t>(raw[k]) << 16;
      std::memcpy(&v[k], &bits, 4);
    }
    return v;
  };
  const std::vector<float> zero_padded = forward(0x00);
  const std::vector<float> nan_padded = forward(0xFF);
  CHECK(all_finite(nan_padded));
  CHECK(rel_error(nan_padded, zero_padded) == 0.0);  // bit for bit
  // The crops' rows lead the image's features (then global rows, separator).
  const std::vector<double> want(s.expected.begin(),
                                 s.expected.begin() + static_cast<int64_t>(real_values));
  const double e = rel_error(zero_padded, want);
  MESSAGE("ABI forward, local path: rel error " << e);
  CHECK(e < kBf16Tolerance);
  api->item_destroy(inst, item);
  for (void* a : allocations) cudaFree(a);
}
