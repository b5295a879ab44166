// The plugin's CUDA path (bf16): against the CPU path on the same random
// weights, graph replays against eager runs for random mixes of sizes, and
// NaN-poisoned memory (workspace, output, padded rows) never reaching a real
// output. Needs a GPU: the suite's main skips without one (fails when
// ENCGRAPH_REQUIRE_GPU=1).
#include "../fp8_gpu_support.hpp"
#include "qwen_test_support.hpp"

#include <encgraph/plugin_loader.hpp>
#include <encgraph/runtime.hpp>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

namespace {

using qwen_test::rel_error;

constexpr double kBf16Tolerance = 2e-2;

// The released 7B tower's widths, 4 blocks deep (two with full attention).
qwen_ref::Config wide_config() {
  qwen_ref::Config c;
  c.depth = 4;
  c.hidden = 1280;
  c.heads = 16;
  c.inter = 3420;
  c.out = 3584;
  c.window = 112;
  c.fullatt = {1, 3};
  return c;
}

struct Geometry {
  int64_t h, w, frames;
  uint64_t seed;
};

std::vector<Geometry> standard_items() {
  return {{224, 224, 1, 1}, {336, 504, 1, 2}, {140, 700, 1, 3},
          {56, 56, 1, 4},   {224, 224, 4, 5}, {168, 112, 3, 6}};
}

std::vector<std::vector<float>> run(encgraph::RuntimeConfig rc, const std::vector<Geometry>& geo,
                                    bool graphs, encgraph::Stats* stats = nullptr) {
  rc.use_graphs = graphs;
  encgraph::Runtime rt(rc);
  if (graphs) rt.capture();
  std::vector<encgraph::Item> items;
  for (const Geometry& g : geo)
    items.push_back(rt.make_item(g.frames > 1 ? encgraph::test::video(g.h, g.w, g.frames, g.seed)
                                              : encgraph::test::image(g.h, g.w, g.seed)));
  const encgraph::Result r = rt.execute(items);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < items.size(); ++i) out.push_back(r.item_as_float(i));
  if (stats) *stats = rt.stats();
  return out;
}

// `tuned`: time product algorithms per captured size (the default). Untuned,
// every instance picks the same algorithms, so runs compare bit for bit.
encgraph::RuntimeConfig config(const qwen_ref::Config& c, const std::string& device,
                               bool tuned = true) {
  encgraph::RuntimeConfig rc = qwen_test::runtime_config(c, device, "random");
  rc.plugin_config.emplace_back("seed", "3");
  if (!tuned) rc.plugin_config.emplace_back("tune_gemm", "false");
  rc.budgets.token_budgets = {64, 256, 1024};
  rc.budgets.max_items_per_batch = 8;
  return rc;
}

void compare(const std::vector<std::vector<float>>& got,
             const std::vector<std::vector<float>>& want, double tolerance, const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = rel_error(got[i], want[i]);
    MESSAGE(what << " item " << i << ": rel error " << e);
    CHECK(qwen_test::all_finite(got[i]));
    CHECK(e < tolerance);
  }
}

}  // namespace

// 224-pixel windows: 256 patches, over the 64 that the fused rotary window
// attention takes, so these layers run the rotary pass and then attention.
qwen_ref::Config large_window_config() {
  qwen_ref::Config c;
  c.window = 224;
  return c;
}

TEST_CASE("CUDA matches the CPU path on the same random weights") {
  for (const qwen_ref::Config& c : {qwen_ref::Config{}, wide_config(), large_window_config()}) {
    CAPTURE(c.hidden);
    CAPTURE(c.window);
    const auto geo = standard_items();
    const auto cpu = run(config(c, "cpu"), geo, false);
    compare(run(config(c, "cuda"), geo, true), cpu, kBf16Tolerance, "cuda graphs vs cpu");
    compare(run(config(c, "cuda"), geo, false), cpu, kBf16Tolerance, "cuda eager vs cpu");
  }
}

// Whether this GPU runs our Hopper kernels (compute capability 9.x); asking
// for a fused form elsewhere is an error at start-up.
bool runs_hopper_kernels() {
  int device = 0, major = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  return major == 9;
}

// Each value of the plugin key `key` (the first runs on every GPU, the rest
// are fused forms) against the CPU path, in graphs and eager, and against the
// first: the same products in other kernels and roundings, so the bound is
// bf16's. The fused forms are refused off Hopper. Returns each value's
// stats (graphs), empty where refused.
std::vector<encgraph::Stats> forms_match_cpu(const qwen_ref::Config& c, const char* key,
                                             const std::vector<const char*>& forms) {
  const auto geo = standard_items();
  const auto cpu = run(config(c, "cpu"), geo, false);
  const bool hopper = runs_hopper_kernels();
  std::vector<std::vector<std::vector<float>>> eager(forms.size());  // per form, per item
  std::vector<encgraph::Stats> stats(hopper ? forms.size() : 1);
  for (size_t f = 0; f < forms.size(); ++f) {
    CAPTURE(forms[f]);
    encgraph::RuntimeConfig rc = config(c, "cuda");
    rc.plugin_config.emplace_back(key, forms[f]);
    if (f > 0 && !hopper) {
      CHECK_THROWS_WITH(encgraph::Runtime{rc},
                        doctest::Contains("needs a GPU of compute capability 9.0"));
      continue;
    }
    compare(run(rc, geo, true, &stats[f]), cpu, kBf16Tolerance, "cuda graphs vs cpu");
    eager[f] = run(rc, geo, false);
    compare(eager[f], cpu, kBf16Tolerance, "cuda eager vs cpu");
    if (f > 0) compare(eager[f], eager[0], kBf16Tolerance, "fused form vs the first");
  }
  return stats;
}

// The MLP's three forms (mlp_kernel): cuBLASLt with the SiLU·mul pass, our
// fused Hopper kernel after the norm, and that kernel with the norm inside;
// 27 blocks of 128 features with 36 padding ones (3420 -> 3456). The config's
// norm2 weights are random (not ones), so the fold of norm2 into gate/up's
// columns shows.
TEST_CASE("the three MLP forms match the CPU path, in graphs and eager") {
  const auto stats =
      forms_match_cpu(wide_config(), "mlp_kernel", {"cublaslt", "fused", "fused_norm"});
  // The fused kernels' workspace has no [gate | up] product (2 x 3456 bf16 a
  // patch row): the key did switch kernels.
  for (size_t f = 1; f < stats.size(); ++f) {
    const int64_t saved = stats[0].graph_memory_bytes - stats[f].graph_memory_bytes;
    CHECK(saved >= 1024 * 4 * 2 * 3456 * 2);  // at least the 1024-token graph's 4096 rows
  }
}

// norm1 and qkv's two forms (qkv_kernel): the norm then cuBLASLt's product,
// and our Hopper kernel with the norm inside. The config's norm1 weights are
// random, so the fold of norm1 into qkv's columns shows.
TEST_CASE("the two qkv forms match the CPU path, in graphs and eager") {
  forms_match_cpu(wide_config(), "qkv_kernel", {"cublaslt", "fused_norm"});
}

// precision = "fp8_linear": the blocks' qkv, gate/up and down in FP8 (weights per
// output channel, activations per row inside the forward). Against the CPU
// path (f32) on the same random weights, in graphs and eager: within FP8's
// error, a bounded multiple of bf16's, finite everywhere (NaN-poisoned
// padding and workspace never reach an item). Graphs and eager agree at
// bf16's bound: the same kernels, scales computed inside each replay.
TEST_CASE("precision fp8_linear stays within FP8's error of the CPU path, in graphs and eager") {
  const qwen_ref::Config c = wide_config();
  encgraph::RuntimeConfig rc = config(c, "cuda");
  rc.plugin_config.emplace_back("precision", "fp8_linear");
  if (!encgraph::test::fp8_gpu_or_refused(rc)) return;
  const auto geo = standard_items();
  const auto cpu = run(config(c, "cpu"), geo, false);
  const auto bf16 = run(config(c, "cuda"), geo, true);
  const auto graphs = run(rc, geo, true);
  const auto eager = run(rc, geo, false);
  // Measured on an H100: 0.069-0.075 (Qwen2.5-VL), 0.041-0.068 (Qwen3-VL) on
  // these fan-in random weights, against bf16's 0.007-0.011.
  constexpr double kFp8Tolerance = 1e-1;
  compare(graphs, cpu, kFp8Tolerance, "fp8 graphs vs cpu");
  compare(eager, cpu, kFp8Tolerance, "fp8 eager vs cpu");
  compare(graphs, eager, kBf16Tolerance, "fp8 graphs vs fp8 eager");
  for (size_t i = 0; i < geo.size(); ++i) {
    const double e8 = rel_error(graphs[i], cpu[i]), e16 = rel_error(bf16[i], cpu[i]);
    MESSAGE("item " << i << ": fp8 error " << e8 << ", bf16 error " << e16);
    CHECK(e8 > e16);  // the products did run in FP8
  }
  // The key is refused with the bf16 forms' keys, which it replaces.
  encgraph::RuntimeConfig both = rc;
  both.plugin_config.emplace_back("mlp_kernel", "cublaslt");
  CHECK_THROWS_WITH(encgraph::Runtime{both}, doctest::Contains("drop them"));
}

// "auto"'s timed MLP and qkv choices per graph size persist beside the
// products' algorithms, and a second start with the same folder keeps them.
TEST_CASE("the MLP's and qkv's timed choices per graph size land in the tuning cache") {
  qwen_test::TempDir dir("qwen-mlp-cache");
  encgraph::RuntimeConfig rc = config(wide_config(), "cuda");
  rc.plugin_config.emplace_back("tuning_cache", dir.path().string());
  const auto geo = standard_items();
  auto mlp_lines = [&] { return encgraph::test::tuning_cache_lines(dir.path(), "qwen-mlp:"); };
  auto qkv_lines = [&] { return encgraph::test::tuning_cache_lines(dir.path(), "qwen-qkv:"); };

  const auto first = run(rc, geo, true);
  const std::vector<std::string> lines = mlp_lines(), qkv = qkv_lines();
  if (!runs_hopper_kernels()) {  // no fused kernel, nothing to choose
    CHECK(lines.empty());
    CHECK(qkv.empty());
    return;
  }
  CHECK(lines.size() >= rc.budgets.token_budgets.size());  // one a captured size
  for (const std::string& l : lines) {
    CAPTURE(l);
    const std::string value = l.substr(l.rfind(' ') + 1);
    CHECK((value == "fused" || value == "fused_norm" || value == "cublaslt"));
  }
  CHECK(qkv.size() >= rc.budgets.token_budgets.size());
  for (const std::string& l : qkv) {
    CAPTURE(l);
    const std::string value = l.substr(l.rfind(' ') + 1);
    CHECK((value == "fused_norm" || value == "cublaslt"));
  }
  compare(run(rc, geo, true), first, kBf16Tolerance, "second start vs first");
  CHECK(mlp_lines() == lines);
  CHECK(qkv_lines() == qkv);
}

TEST_CASE("CUDA graph replays equal eager runs for random mixes of sizes") {
  std::mt19937_64 rng(17);
  std::vector<Geometry> geo;
  for (uint64_t k = 0; k < 28; ++k) {
    const int64_t h = 28 * (2 + static_cast<int64_t>(rng() % 19));
    const int64_t w = 28 * (2 + static_cast<int64_t>(rng() % 19));
    geo.push_back({h, w, k % 7 == 0 ? 2 + static_cast<int64_t>(rng() % 5) : 1, 100 + k});
  }
  encgraph::RuntimeConfig rc = config(wide_config(), "cuda");
  rc.budgets.token_budgets = {128, 256, 512, 1024};
  encgraph::Stats st;
  const auto graphs = run(rc, geo, true, &st);
  CHECK(st.graph_hits > 0);
  CHECK(st.padded_token_efficiency < 1.0);
  // A padded batch has other row counts than the eager one, so cuBLASLt may
  // pick other algorithms: equal up to bf16 rounding, not bit for bit.
  compare(graphs, run(rc, geo, false), kBf16Tolerance, "graphs vs eager");
}

TEST_CASE("NaN-poisoned workspace and output never reach real rows (runtime)") {
  encgraph::RuntimeConfig rc = config(wide_config(), "cuda", /*tuned=*/false);
  const auto geo = standard_items();
  const auto clean_graphs = run(rc, geo, true);
  const auto clean_eager = run(rc, geo, false);
  rc.poison_memory = true;
  compare(run(rc, geo, true), clean_graphs, 1e-30, "poisoned vs clean graphs");  // bit for bit
  compare(run(rc, geo, false), clean_eager, 1e-30, "poisoned vs clean eager");
  compare(clean_graphs, clean_eager, kBf16Tolerance, "graphs vs eager");
}

TEST_CASE("NaN in padded pixel and rotary rows never reaches real rows (ABI)") {
  const qwen_ref::Config c = wide_config();
  const std::vector<Geometry> geo = {{224, 336, 1, 7}, {112, 112, 3, 8}};  // 96 + 32 of 256
  const auto clean = run(config(c, "cuda"), geo, false);

  encgraph::PluginRegistry registry(encgraph::test::plugin_dirs());
  const eg_plugin_api* api = registry.get("qwen2_5_vl").api;
  auto kv = qwen_ref::plugin_config(c);
  kv.emplace_back("seed", "3");
  std::vector<eg_config_entry> entries;
  for (const auto& [k, v] : kv) entries.push_back({k.c_str(), v.c_str()});
  eg_create_params p{};
  p.struct_size = sizeof(p);
  p.device = EG_DEVICE_CUDA;
  p.weights = "random";
  p.config = entries.data();
  p.num_config = static_cast<int64_t>(entries.size());
  eg_error err{};
  eg_instance* inst = nullptr;
  REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  std::unique_ptr<eg_instance, void (*)(eg_instance*)> guard(inst, api->destroy);
  std::vector<eg_item*> items;
  for (const Geometry& g : geo) {
    const eg_item_desc d = g.frames > 1 ? encgraph::test::video(g.h, g.w, g.frames, g.seed)
                                        : encgraph::test::image(g.h, g.w, g.seed);
    eg_item* it = nullptr;
    REQUIRE(api->item_create(inst, &d, &it, &err) == EG_OK);
    items.push_back(it);
  }
  eg_model_info info{};
  info.struct_size = sizeof(info);
  REQUIRE(api->model_info(inst, &info, &err) == EG_OK);
  eg_graph_shape shape{};
  shape.token_budget = 256;
  shape.max_batch_size = 8;
  std::vector<std::vector<uint8_t>> host(info.num_buffers);
  std::vector<eg_tensor> dev(info.num_buffers);
  std::vector<eg_replay_buffer> replay(info.num_buffers);
  std::vector<void*> allocations;
  for (int b = 0; b < info.num_buffers; ++b) {
    REQUIRE(api->buffer_shape(inst, &shape, b, &dev[b], &err) == EG_OK);
    dev[b].dtype = info.buffers[b].dtype;
    dev[b].device = EG_DEVICE_CUDA;
    size_t bytes = info.buffers[b].dtype == EG_DTYPE_BF16 ? 2 : 4;
    for (int d = 0; d < dev[b].ndim; ++d) bytes *= static_cast<size_t>(dev[b].shape[d]);
    host[b].assign(bytes, 0xFF);
    REQUIRE(cudaMalloc(&dev[b].data, bytes) == cudaSuccess);
    allocations.push_back(dev[b].data);
    replay[b].staging = dev[b];
    replay[b].staging.data = host[b].data();
    replay[b].rows = -1;
  }
  std::vector<const eg_item*> citems(items.begin(), items.end());
  REQUIRE(api->prepare_replay_buffers(inst, &shape, citems.data(), 2, replay.data(),
                                      info.num_buffers, &err) == EG_OK);
  // Pads as the runtime does (tables repeat their last entry, inverse index 0);
  // the pixel and rotary rows past the batch get `fill` bytes.
  auto upload = [&](uint8_t fill) {
    for (int b = 0; b < info.num_buffers; ++b) {
      std::vector<uint8_t> bytes = host[b];
      const int64_t rows = replay[b].rows, cap = dev[b].shape[0];
      const size_t row_bytes = bytes.size() / static_cast<size_t>(cap);
      auto* v = reinterpret_cast<int32_t*>(bytes.data());
      if (info.buffers[b].padding_logic == EG_PAD_REPEAT_LAST)
        for (int64_t r = rows; r < cap; ++r) v[r] = v[rows - 1];
      else if (info.buffers[b].dtype == EG_DTYPE_I32)
        for (int64_t r = rows; r < cap; ++r) v[r] = 0;
      else
        std::fill(bytes.begin() + static_cast<int64_t>(rows * row_bytes), bytes.end(), fill);
      REQUIRE(cudaMemcpy(dev[b].data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) ==
              cudaSuccess);
    }
  };
  eg_tensor out{};
  REQUIRE(api->output_shape(inst, &shape, &out, &err) == EG_OK);
  const size_t out_bytes = static_cast<size_t>(out.shape[0] * out.shape[1]) * 2;
  size_t ws = 0;
  REQUIRE(api->workspace_size(inst, &shape, &ws, &err) == EG_OK);
  void* out_mem = nullptr;
  void* ws_mem = nullptr;
  REQUIRE(cudaMalloc(&out_mem, out_bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&ws_mem, ws) == cudaSuccess);
  allocations.push_back(out_mem);
  allocations.push_back(ws_mem);
  // One forward: padding and scratch filled with `fill` bytes (0xFF: NaN).
  auto forward = [&](uint8_t fill) {
    upload(fill);
    REQUIRE(cudaMemset(out_mem, fill, out_bytes) == cudaSuccess);
    REQUIRE(cudaMemset(ws_mem, fill, ws) == cudaSuccess);
    eg_forward_args args{};
    args.shape = shape;
    args.buffers = dev.data();
    args.num_buffers = info.num_buffers;
    args.output = out;
    args.output.data = out_mem;
    args.workspace = ws_mem;
    args.workspace_size = ws;
    REQUIRE_MESSAGE(api->forward(inst, &args, &err) == EG_OK, err.message);
    std::vector<uint16_t> raw(out_bytes / 2);
    REQUIRE(cudaMemcpy(raw.data(), out_mem, out_bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<std::vector<float>> items_out;
    size_t row = 0;
    for (size_t i = 0; i < geo.size(); ++i) {
      std::vector<float> got(clean[i].size());
      for (size_t k = 0; k < got.size(); ++k) {
        const uint32_t bits = static_cast<uint32_t>(raw[row + k]) << 16;
        std::memcpy(&got[k], &bits, 4);
      }
      row += got.size();
      items_out.push_back(std::move(got));
    }
    return items_out;
  };
  const auto zero_padded = forward(0x00);
  compare(forward(0xFF), zero_padded, 1e-30, "NaN padding vs zero padding");  // bit for bit
  compare(zero_padded, clean, kBf16Tolerance, "ABI forward vs runtime eager");
  for (eg_item* it : items) api->item_destroy(inst, it);
  for (void* a : allocations) cudaFree(a);
}
