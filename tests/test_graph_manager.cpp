// The budget-graph manager on the CPU backend: capture/replay equals eager for
// random mixes, padding logics, unset buffers, stats, clear/recapture, capture
// axes, dual paths, eager fallback, and every error path; ABI 1.1 host-staged
// capture inputs (and the 1.0 device path), named outputs, frames as a budget
// axis, path units, honest statistics, eager mode, padding overrides,
// poisoned staging, and the phases of capture and the calibration's timing.
#include "device_backend.hpp"
#include "graph_manager.hpp"
#include "manager_checks.hpp"
#include "modelled_timing.hpp"
#include "plugin_instance.hpp"
#include "test_support.hpp"

#include <encgraph/error.hpp>
#include <encgraph/plugin_loader.hpp>

#include <doctest/doctest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

using namespace encgraph;
using namespace encgraph::test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Captures log lines while alive.
struct LogCapture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  LogCapture() { spdlog::default_logger()->sinks().push_back(sink); }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
  bool saw(const std::string& part, const std::string& also = "") const {
    for (const auto& line : sink->last_formatted())
      if (contains(line, part) && contains(line, also)) return true;
    return false;
  }
  std::string find(const std::string& part) const {  // the last line with `part`, or ""
    std::string found;
    for (const auto& line : sink->last_formatted())
      if (contains(line, part)) found = line;
    return found;
  }
};

}  // namespace

TEST_CASE("toy output follows the documented formula for known pixels") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "4");
  set(cfg, "bias", "0.75");
  cfg.budgets.token_budgets = {16, 64};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  rt.capture();
  // 28x42 image: 2x3 = 6 tokens; values pixels[(t*4+c) % n] / 255.
  std::vector<uint8_t> pixels(28 * 42 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  eg_item_desc d = image(28, 42, 0);
  d.pixels = pixels.data();
  std::vector<Item> items;
  items.push_back(rt.make_item(d));
  items.push_back(rt.make_item(image(14, 14, 5)));  // shares the batch, must not disturb item 0
  const Result r = rt.execute(items);
  const std::vector<float> out = r.item_as_float(0);
  REQUIRE(out.size() == 6 * 4);
  for (int c = 0; c < 4; ++c) {
    float acc = 0;
    for (int t = 0; t < 6; ++t) {
      acc += pixels[(t * 4 + c) % pixels.size()] / 255.0f;
      const float expected = 0.75f + acc + 0.001f * t + 0.01f * c;
      CHECK(out[t * 4 + c] == doctest::Approx(expected).epsilon(1e-6));
    }
  }
  CHECK(rt.stats().graph_hits == 2);
}

TEST_CASE("random mixes: one graph call equals per-item eager runs, in order") {
  std::mt19937 rng(2024);
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "min_budget", "64");
  set(cfg, "max_budget", "1024");
  Runtime graphs(cfg);
  graphs.capture();
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  Runtime eager(eager_cfg);
  for (int trial = 0; trial < 12; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 1 + trial * 3, 40));
  const Stats s = graphs.stats();
  CHECK(s.graph_hits > 0);
  CHECK(s.num_graphs == 5);
  CHECK(eager.stats().graph_hits == 0);
}

TEST_CASE("padding logics are applied on every replay, also after a larger batch") {
  // The toy's CPU forward fails if x padding is not zero, cu_seqlens is not
  // repeated, or seq_id padding (plugin callback) is not -1.
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {256};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> big, small;
  for (int i = 0; i < 8; ++i) big.push_back(rt.make_item(image(14 * 5, 14 * 6, i)));  // 240
  small.push_back(rt.make_item(image(14, 28, 99)));                                   // 2
  CHECK_NOTHROW(rt.execute(big));
  CHECK_NOTHROW(rt.execute(small));
  CHECK_NOTHROW(rt.execute(big));
  CHECK(rt.stats().graph_hits == 17);
}

TEST_CASE("stats: hits, misses, hit rate, padded-token efficiency") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 128};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 5, 14 * 10, 1)));   // 50 tokens -> 64
  items.push_back(rt.make_item(image(14 * 20, 14 * 20, 2)));  // 400 tokens: no budget
  const Result r = rt.execute(items);
  CHECK(r.rows(0) == 50);
  CHECK(r.rows(1) == 400);
  const Stats s = rt.stats();
  CHECK(s.graph_hits == 1);
  CHECK(s.graph_misses == 1);
  CHECK(s.hit_rate == doctest::Approx(0.5));
  CHECK(s.real_tokens == 50);
  CHECK(s.budget_tokens == 64);
  CHECK(s.padded_token_efficiency == doctest::Approx(50.0 / 64.0));
  CHECK(s.batches_graph == 1);
  CHECK(s.batches_eager == 1);
  CHECK(s.batches_mixed == 0);
  CHECK(s.token_budgets == std::vector<int64_t>{64, 128});
  CHECK(s.graph_memory_bytes > 0);
  REQUIRE(s.paths.size() == 1);
  CHECK(s.paths[0].name == "default");
  CHECK(s.paths[0].graphs == 2);
  CHECK(s.paths[0].batches_graph == 1);
  CHECK(s.paths[0].batches_eager == 1);
  CHECK(s.paths[0].eager_by_reason[static_cast<int>(EagerReason::TooLarge)] == 1);
  CHECK(s.paths[0].real_tokens == 50);
  CHECK(s.paths[0].budget_tokens == 64);
}

TEST_CASE("an item larger than every budget runs eagerly and matches eager") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {16, 32};
  cfg.budgets.max_items_per_batch = 2;
  Runtime graphs(cfg);
  graphs.capture();
  cfg.use_graphs = false;
  Runtime eager(cfg);
  check_batch_equals_per_item(graphs, eager,
                              {image(14 * 12, 14 * 12, 3), image(14, 14, 4), image(28, 28, 5)});
  CHECK(graphs.stats().graph_misses == 1);
}

TEST_CASE("values the plugin leaves unset keep their captured contents") {
  // The toy never sets "bias" at replay; it is 1.5 from capture preparation.
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "bias", "1.5");
  set(cfg, "hidden", "2");
  cfg.budgets.token_budgets = {32};
  cfg.budgets.max_items_per_batch = 2;
  Runtime rt(cfg);
  rt.capture();
  std::vector<uint8_t> zeros(14 * 14 * 3, 0);
  eg_item_desc d = image(14, 14, 0);
  d.pixels = zeros.data();
  std::vector<Item> items;
  items.push_back(rt.make_item(d));
  const std::vector<float> out = rt.execute(items).item_as_float(0);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == doctest::Approx(1.5f));
  CHECK(out[1] == doctest::Approx(1.51f));
}

TEST_CASE("clear releases graphs; capture again works; is_captured and modalities") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64, 128, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  CHECK_FALSE(rt.is_captured());
  CHECK(rt.supports_modality(EG_MODALITY_IMAGE));
  CHECK(rt.supports_modality(EG_MODALITY_VIDEO));
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().num_graphs == 3);
  const int64_t memory = rt.stats().graph_memory_bytes;
  std::vector<Item> items;
  items.push_back(rt.make_item(image(28, 28, 1)));
  const std::vector<float> before = rt.execute(items).item_as_float(0);
  rt.clear();
  CHECK_FALSE(rt.is_captured());
  CHECK(rt.stats().num_graphs == 0);
  CHECK(rt.execute(items).item_as_float(0) == before);  // eager while cleared
  CHECK(rt.stats().graph_misses == 1);
  CHECK(rt.stats().paths[0].eager_by_reason[static_cast<int>(EagerReason::GraphsOff)] == 1);
  CHECK(rt.stats().paths[0].graphs == 0);
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().graph_memory_bytes == memory);
  CHECK(rt.execute(items).item_as_float(0) == before);
  CHECK(rt.stats().graph_hits == 2);
}

TEST_CASE("empty calls return an empty result") {
  RuntimeConfig cfg = toy_config("cpu");
  Runtime rt(cfg);
  rt.capture();
  const Result r = rt.execute(std::vector<Item>{});
  CHECK(r.size() == 0);
  CHECK(r.total_rows() == 0);
}

TEST_CASE("capture axes: the cartesian product is captured and the batch's keys replayed") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "capture_axis_keys", "[1, 2, 4]");
  cfg.budgets.token_budgets = {64, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime graphs(cfg);
  graphs.capture();
  CHECK(graphs.stats().num_graphs == 6);
  cfg.use_graphs = false;
  Runtime eager(cfg);
  // Same frame count within a call, so per-item runs select the same key.
  check_batch_equals_per_item(graphs, eager, {video(28, 28, 2, 1), video(42, 28, 2, 2)});
  check_batch_equals_per_item(graphs, eager, {video(28, 28, 3, 3), video(28, 56, 3, 4)});
  CHECK(graphs.stats().graph_misses == 0);
  // Scale 4 (3 frames) differs from scale 2: the key reached the graph.
  std::vector<Item> a, b;
  a.push_back(graphs.make_item(video(28, 28, 2, 9)));
  b.push_back(graphs.make_item(video(28, 28, 3, 9)));
  CHECK(graphs.execute(a).item_as_float(0)[0] != graphs.execute(b).item_as_float(0)[0]);
}

TEST_CASE("more than 64 graphs are captured with a warning") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  std::string keys = "[";
  for (int k = 1; k <= 33; ++k) keys += std::to_string(k) + (k < 33 ? ", " : "]");
  set(cfg, "capture_axis_keys", keys);
  cfg.budgets.token_budgets = {8, 16};
  cfg.budgets.max_items_per_batch = 2;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.stats().num_graphs == 66);
  CHECK(log.saw("capturing 66 graphs", "33 capture-axis key combinations"));
}

TEST_CASE("past 64 graphs without capture axes the warning names the budgets, not axes") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets.clear();
  for (int64_t b = 8; b <= 8 * 70; b += 8) cfg.budgets.token_budgets.push_back(b);
  cfg.budgets.max_items_per_batch = 1;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.stats().num_graphs == 70);
  CHECK(log.saw("capturing 70 graphs", "70 budgets"));
  CHECK_FALSE(log.saw("capturing 70 graphs", "capture-axis"));
}

TEST_CASE("a plan over max_graphs through capture axes fails before anything is captured") {
  RuntimeConfig cfg = toy_config("cpu");
  std::string keys = "[";
  for (int k = 1; k <= 40; ++k) keys += std::to_string(k) + (k < 40 ? ", " : "]");
  set(cfg, "capture_axis_keys", keys);
  cfg.budgets.token_budgets = {8, 16, 32};
  cfg.budgets.max_items_per_batch = 1;
  cfg.budgets.max_graphs = 100;  // 3 budgets x 40 keys = 120
  try {
    Runtime rt(cfg);
    FAIL("a plan of 120 graphs was accepted under max_graphs = 100");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(contains(e.what(), "120 graphs"));
    CHECK(contains(e.what(), "limits.max_graphs"));
  }
}

TEST_CASE("two paths: per-path budgets, zero-token path skipped, own post-processing") {
  std::mt19937 rng(99);
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  set(cfg, "local_min_budget", "128");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  Runtime graphs(cfg);
  CHECK(graphs.plan().path_budgets[0] == std::vector<int64_t>{16, 64, 512});
  CHECK(graphs.plan().path_budgets[1] == std::vector<int64_t>{0, 128, 256, 512});
  graphs.capture();
  CHECK(graphs.stats().num_graphs == 6);
  cfg.use_graphs = false;
  Runtime eager(cfg);
  for (int trial = 0; trial < 6; ++trial)
    check_batch_equals_per_item(graphs, eager, random_descs(rng, 2 + trial * 2, 12));
  // Only small items: the local path gets no tokens and is not run.
  check_batch_equals_per_item(graphs, eager, {image(14, 14, 1), image(28, 28, 2)});
}

TEST_CASE("configuration errors name the setting to change") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {16, 64};
  cfg.budgets.max_items_per_batch = 32;
  std::string msg = error_of([&] { Runtime rt(cfg); });
  CHECK(contains(msg, "max_items_per_batch: 32 must be <= the smallest token budget (16)"));

  RuntimeConfig bad_device = toy_config("tpu");
  CHECK(contains(error_of([&] { Runtime rt(bad_device); }), "runtime.device = \"tpu\""));

  RuntimeConfig missing = toy_config("cpu", "no_such_plugin");
  msg = error_of([&] { Runtime rt(missing); });
  CHECK(contains(msg, "plugin 'no_such_plugin' not found"));
  CHECK(contains(msg, "Available:"));

  RuntimeConfig bad_key = toy_config("cpu");
  set(bad_key, "hiden", "3");
  msg = error_of([&] { Runtime rt(bad_key); });
  CHECK(contains(msg, "plugin 'toy': create failed"));
  CHECK(contains(msg, "unknown config key 'hiden'"));

  // The runtime's own check, on a raw-ABI plugin that declares the combination...
  RuntimeConfig two_paths_axes = toy_config("cpu", "toy_faults");
  set(two_paths_axes, "declare_second_path", "true");
  set(two_paths_axes, "capture_axis_keys", "[1, 2]");
  CHECK(contains(error_of([&] { Runtime rt(two_paths_axes); }),
                 "combines several paths with capture axes"));
  // ... which an SDK plugin cannot even declare.
  RuntimeConfig dual_axes = toy_config("cpu", "toy_dual");
  set(dual_axes, "capture_axis_keys", "[1, 2]");
  CHECK(contains(error_of([&] { Runtime rt(dual_axes); }),
                 "capture axes need a model with one path"));
}

TEST_CASE("a failing forward during capture names the plugin and the budget") {
  RuntimeConfig cfg = toy_config("cpu", "toy_faults");
  set(cfg, "fail_forward_at", "128");
  cfg.budgets.token_budgets = {64, 128, 256};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  const std::string msg = error_of([&] { rt.capture(); });
  CHECK(contains(msg, "plugin 'toy_faults'"));
  CHECK(contains(msg, "budget 128"));
  CHECK(contains(msg, "asked to fail"));
  CHECK_FALSE(rt.is_captured());
}

TEST_CASE("out of memory while capturing: a clear error, or the budget dropped if configured") {
  RuntimeConfig cfg = toy_config("cpu", "toy_faults");
  set(cfg, "huge_workspace_from", "1024");
  cfg.budgets.token_budgets = {256, 512, 1024, 2048};
  cfg.budgets.max_items_per_batch = 4;
  {
    Runtime rt(cfg);
    const std::string msg = error_of([&] { rt.capture(); });
    CHECK(contains(msg, "out of host memory"));
    CHECK(contains(msg, "workspace"));
    CHECK_FALSE(rt.is_captured());
  }
  LogCapture log;
  cfg.drop_budget_on_oom = true;
  Runtime rt(cfg);
  rt.capture();
  CHECK(rt.is_captured());
  CHECK(rt.stats().num_graphs == 2);
  CHECK(log.saw("dropping budget 2048"));
  CHECK(log.saw("dropping budget 1024"));
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 20, 14 * 20, 1)));  // 400 tokens -> 512 graph
  items.push_back(rt.make_item(image(14 * 20, 14 * 30, 2)));  // 600 tokens -> eager
  const Result r = rt.execute(items);
  CHECK(r.rows(1) == 600);
  CHECK(rt.stats().graph_hits == 1);
  CHECK(rt.stats().graph_misses == 1);
}

TEST_CASE("invalid items are rejected with the plugin's reason") {
  Runtime rt(toy_config("cpu"));
  const std::string msg = error_of([&] { rt.make_item(image(0, 14, 1)); });
  CHECK(contains(msg, "item_create failed"));
  CHECK(contains(msg, "geometry must be positive"));
}

TEST_CASE("an item may outlive its runtime: it keeps the plugin instance alive") {
  Item survivor;
  {
    Runtime rt(toy_config("cpu"));
    survivor = rt.make_item(image(28, 28, 1));
    CHECK(survivor.spec().output_tokens == 4);
  }
  CHECK(survivor.get() != nullptr);  // destroyed after the runtime, without a crash
}

// ---------------------------------------------------------------- ABI 1.1 and issue 11

namespace {

int reason_count(const Stats& s, int path, EagerReason r) {
  return static_cast<int>(s.paths.at(path).eager_by_reason[static_cast<int>(r)]);
}

// The toy's table, copied so a test can count or falsify calls, or present it
// as a 1.0 plugin; the manager is driven directly (as Runtime does).
namespace wrap {
const eg_plugin_api* real = nullptr;
int capture_staging_calls = 0;
int capture_inputs_calls = 0;
bool skip_last_row = false;  // replay claims x's last real row but never writes it
int64_t wrong_width = 0;     // added to output 1's width

void reset(const eg_plugin_api* api) {
  real = api;
  capture_staging_calls = capture_inputs_calls = 0;
  skip_last_row = false;
  wrong_width = 0;
}

eg_status capture_staging(eg_instance* in, const eg_graph_shape* s, eg_replay_buffer* b, int32_t nb,
                          eg_error* e) {
  ++capture_staging_calls;
  return real->prepare_capture_staging(in, s, b, nb, e);
}

// A 1.0 plugin's capture inputs, written straight into (CPU) device buffers:
// the toy's staged dummy values, padded here by each buffer's logic.
eg_status capture_inputs(eg_instance* in, const eg_graph_shape* s, const eg_tensor* buffers,
                         int32_t nb, void* stream, eg_error* e) {
  ++capture_inputs_calls;
  eg_replay_buffer views[EG_MAX_BUFFERS];
  eg_model_info info{};
  info.struct_size = sizeof(info);
  if (real->model_info(in, &info, e) != EG_OK) return EG_ERR_INTERNAL;
  for (int b = 0; b < nb; ++b) {
    views[b].staging = buffers[b];
    views[b].rows = -1;
    size_t bytes = dtype_size(buffers[b].dtype);
    for (int d = 0; d < buffers[b].ndim; ++d) bytes *= static_cast<size_t>(buffers[b].shape[d]);
    std::memset(buffers[b].data, 0, bytes);
  }
  const eg_status st = real->prepare_capture_staging(in, s, views, nb, e);
  if (st != EG_OK) return st;
  for (int b = 0; b < nb; ++b) {
    const eg_tensor& t = buffers[b];
    const int64_t rows = views[b].rows;
    if (rows <= 0 || t.ndim == 0 || rows >= t.shape[0]) continue;
    size_t row_bytes = dtype_size(t.dtype);
    for (int d = 1; d < t.ndim; ++d) row_bytes *= static_cast<size_t>(t.shape[d]);
    char* p = static_cast<char*>(t.data);
    if (info.buffers[b].padding_logic == EG_PAD_REPEAT_LAST)
      for (int64_t r = rows; r < t.shape[0]; ++r)
        std::memcpy(p + r * row_bytes, p + (rows - 1) * row_bytes, row_bytes);
    else if (info.buffers[b].padding_logic == EG_PAD_CALLBACK &&
             real->pad_buffer(in, b, &t, rows, stream, e) != EG_OK)
      return EG_ERR_INTERNAL;
  }
  return EG_OK;
}

eg_status replay(eg_instance* in, const eg_graph_shape* s, const eg_item* const* items, int64_t n,
                 eg_replay_buffer* b, int32_t nb, eg_error* e) {
  if (!skip_last_row) return real->prepare_replay_buffers(in, s, items, n, b, nb, e);
  // The plugin writes x into a side buffer; all but its last row reach staging.
  const eg_tensor& x = b[0].staging;
  const size_t row_bytes = static_cast<size_t>(x.shape[1]) * sizeof(float);
  std::vector<char> side(static_cast<size_t>(x.shape[0]) * row_bytes);
  std::vector<eg_replay_buffer> views(b, b + nb);
  views[0].staging.data = side.data();
  const eg_status st = real->prepare_replay_buffers(in, s, items, n, views.data(), nb, e);
  for (int k = 0; k < nb; ++k) b[k].rows = views[k].rows;
  if (st == EG_OK && views[0].rows > 0)
    std::memcpy(x.data, side.data(), static_cast<size_t>(views[0].rows - 1) * row_bytes);
  return st;
}

eg_status output_shape_at(eg_instance* in, const eg_graph_shape* s, int32_t index, eg_tensor* out,
                          eg_error* e) {
  const eg_status st = real->output_shape_at(in, s, index, out, e);
  if (st == EG_OK && index == 1) out->shape[1] += wrong_width;
  return st;
}
}  // namespace wrap

struct WrappedToy {
  eg_plugin_api table{};
  LoadedPlugin loaded;
  std::shared_ptr<DeviceBackend> backend = make_cpu_backend();
  std::shared_ptr<PluginInstance> instance;
  std::unique_ptr<GraphManager> manager;

  // abi10: the table as a 1.0 plugin shows it (no 1.1 entries, capture
  // inputs written on the device).
  // timing: the cost model's times (null: the CPU backend's wall clock).
  WrappedToy(const RuntimeConfig& cfg, bool abi10, std::shared_ptr<RunTiming> timing = nullptr) {
    PluginRegistry registry(cfg.plugin_dirs);
    loaded = registry.get(cfg.plugin);
    wrap::reset(loaded.api);
    table = *loaded.api;
    table.prepare_replay_buffers = wrap::replay;
    if (abi10) {
      table.abi_minor = 0;
      table.struct_size = EG_PLUGIN_API_V1_0_SIZE;
      table.prepare_capture_inputs = wrap::capture_inputs;
      table.prepare_capture_staging = nullptr;
      table.output_shape_at = nullptr;
      table.postprocess_outputs = nullptr;
      loaded.abi_minor = 0;
    } else {
      table.prepare_capture_staging = wrap::capture_staging;
      if (table.output_shape_at) table.output_shape_at = wrap::output_shape_at;
    }
    loaded.api = &table;
    instance =
        std::make_shared<PluginInstance>(loaded, EG_DEVICE_CPU, 0, cfg.weights, cfg.plugin_config);
    manager = std::make_unique<GraphManager>(backend, *instance, cfg, std::move(timing));
  }
  ~WrappedToy() {
    manager.reset();
    wrap::reset(nullptr);
  }
  std::vector<Item> make(const std::vector<eg_item_desc>& descs) {
    std::vector<Item> items;
    for (const auto& d : descs) {
      eg_item_spec spec{};
      eg_item* item = instance->make_item(d, spec);
      items.emplace_back(instance, item, spec);
    }
    return items;
  }
  Result run(const std::vector<Item>& items, ExecuteMode mode = ExecuteMode::Planned) {
    std::vector<const Item*> ptrs;
    for (const auto& i : items) ptrs.push_back(&i);
    return manager->execute(ptrs, mode);
  }
};

std::vector<eg_item_desc> mixed_images() {
  return {image(14 * 3, 14 * 5, 1), image(14, 14, 2), image(14 * 6, 14 * 4, 3),
          image(14 * 2, 14 * 9, 4), image(14 * 7, 14 * 7, 5)};
}

void check_same_rows(const Result& a, const Result& b, size_t o = 0) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a.item_as_float(i, o), y = b.item_as_float(i, o);
    REQUIRE(x.size() == y.size());
    size_t bad = 0;
    for (size_t k = 0; k < x.size(); ++k)
      if (std::isnan(x[k]) || std::fabs(x[k] - y[k]) > 1e-5f) ++bad;
    INFO("item " << i << ", output " << o);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("a small batch on a far larger budget runs eagerly when that is faster") {
  // Forwards cost 2 ms per 1024 budget tokens: 120 tokens on a 16384 budget
  // is far cheaper eagerly; a batch that nearly fills the budget still replays.
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "256");
  set(cfg, "check_padding", "false");
  cfg.budgets.token_budgets = {64, 16384};
  cfg.budgets.max_items_per_batch = 64;
  cfg.prefer_faster_path = true;
  WrappedToy toy(cfg, false, std::make_shared<ModelledTiming>());
  toy.manager->capture();
  const std::vector<Item> small = toy.make({image(14 * 10, 14 * 12, 1)});  // 120 tokens
  std::vector<eg_item_desc> full_descs;
  for (uint64_t i = 0; i < 4; ++i) full_descs.push_back(image(14 * 60, 14 * 64, i));  // 15360
  const std::vector<Item> full = toy.make(full_descs);
  const std::vector<float> eager_rows = toy.run(small).item_as_float(0);
  Stats s = toy.manager->stats();
  CHECK(s.batches_eager_chosen == 1);
  CHECK(s.batches_eager == 1);
  CHECK(s.graph_hits == 0);
  CHECK(s.graph_misses == 1);  // a graph was there, but the item did not replay
  CHECK(s.paths[0].eager_by_reason[static_cast<int>(EagerReason::ChosenFaster)] == 1);
  toy.run(full);
  s = toy.manager->stats();
  CHECK(s.batches_graph == 1);
  CHECK(s.graph_hits == 4);

  cfg.prefer_faster_path = false;  // the same batch replayed: identical rows
  Runtime always_graph(cfg);
  always_graph.capture();
  std::vector<Item> again;
  again.push_back(always_graph.make_item(image(14 * 10, 14 * 12, 1)));
  CHECK(always_graph.execute(again).item_as_float(0) == eager_rows);
  CHECK(always_graph.stats().graph_hits == 1);
}

TEST_CASE(
    "ABI 1.1: capture inputs are staged on the host; prepare_capture_inputs is never called") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {32, 64, 128};
  cfg.budgets.max_items_per_batch = 4;
  WrappedToy toy(cfg, false);
  REQUIRE(bool(toy.instance->prepare_capture_staging()));
  toy.manager->capture();
  CHECK(wrap::capture_staging_calls == 3);  // one per graph
  CHECK(wrap::capture_inputs_calls == 0);
  const std::vector<Item> items = toy.make(mixed_images());
  const Result graphs = toy.run(items);
  CHECK(toy.manager->stats().graph_misses == 0);
  // Eager runs stage the dummy values and the batch on the host too.
  const int before = wrap::capture_staging_calls;
  const Result eager = toy.run(items, ExecuteMode::Eager);
  CHECK(wrap::capture_staging_calls > before);
  CHECK(wrap::capture_inputs_calls == 0);
  check_same_rows(graphs, eager);
}

TEST_CASE("ABI 1.0: capture inputs are written on the device; results equal the 1.1 path") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {32, 64, 128};
  cfg.budgets.max_items_per_batch = 4;
  Result staged;
  {
    WrappedToy toy(cfg, false);
    toy.manager->capture();
    staged = toy.run(toy.make(mixed_images()));
  }
  WrappedToy old(cfg, true);
  CHECK(old.instance->abi_minor() == 0);
  CHECK_FALSE(bool(old.instance->prepare_capture_staging()));
  CHECK(old.instance->outputs().size() == 1);  // a 1.0 plugin has one output
  old.manager->capture();
  CHECK(wrap::capture_inputs_calls == 3);
  CHECK(wrap::capture_staging_calls == 0);
  const std::vector<Item> items = old.make(mixed_images());
  const Result graphs = old.run(items);
  CHECK(graphs.num_outputs() == 1);
  CHECK(old.manager->stats().graph_hits == 5);
  check_same_rows(graphs, staged);
  const int before = wrap::capture_inputs_calls;
  check_same_rows(old.run(items, ExecuteMode::Eager), staged);
  CHECK(wrap::capture_inputs_calls > before);  // eager runs too
}

TEST_CASE("named outputs: 'pooled' is one row per item, the mean of its rows, graph and eager") {
  for (const char* plugin : {"toy", "toy_dual"}) {
    for (bool graphs : {true, false}) {
      RuntimeConfig cfg = toy_config("cpu", plugin);
      cfg.budgets.token_budgets = {16, 64, 256};
      cfg.budgets.max_items_per_batch = 4;
      cfg.use_graphs = graphs;
      cfg.poison_memory = true;
      Runtime rt(cfg);
      rt.capture();
      std::vector<Item> items;
      for (const auto& d : mixed_images()) items.push_back(rt.make_item(d));
      const Result r = rt.execute(items);
      INFO(plugin << (graphs ? " graphs" : " eager"));
      REQUIRE(r.num_outputs() == 2);
      const std::optional<size_t> pooled = r.find_output("pooled");
      REQUIRE(pooled.has_value());
      CHECK(*pooled == 1);
      for (size_t i = 0; i < items.size(); ++i) {
        CHECK(r.rows(i, 1) == 1);
        CHECK(r.rows(i, 0) == items[i].spec().output_tokens);
        const std::vector<float> rows = r.item_as_float(i, 0), mean = r.item_as_float(i, 1);
        const size_t hidden = static_cast<size_t>(r.hidden_size(1));
        REQUIRE(mean.size() == hidden);
        const size_t n = rows.size() / hidden;
        for (size_t d = 0; d < hidden; ++d) {
          double sum = 0;
          for (size_t t = 0; t < n; ++t) sum += rows[t * hidden + d];
          CHECK(mean[d] == doctest::Approx(sum / static_cast<double>(n)).epsilon(1e-4));
        }
      }
    }
  }
}

TEST_CASE("named outputs: a wrong output shape names the plugin, the output and the graph") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {32, 64};
  cfg.budgets.max_items_per_batch = 4;
  WrappedToy toy(cfg, false);
  REQUIRE(bool(toy.table.output_shape_at == wrap::output_shape_at));
  wrap::wrong_width = 3;
  const std::string msg = error_of([&] { toy.manager->capture(); });
  CHECK(contains(msg, "plugin 'toy'"));
  CHECK(contains(msg, "output 'pooled'"));
  CHECK(contains(msg, "path 0 budget"));
  CHECK_FALSE(toy.manager->is_captured());
  // Eager runs check it as well.
  const std::vector<Item> items = toy.make({image(28, 28, 1)});
  CHECK(contains(error_of([&] { toy.run(items); }), "output 'pooled'"));
}

TEST_CASE("frames are a budget axis: many short videos in one request") {
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "max_frames_per_video", "16");
  cfg.budgets.token_budgets = {64, 256};
  cfg.budgets.max_items_per_batch = 8;
  cfg.budgets.max_frames_per_batch = 6;
  Runtime graphs(cfg);
  CHECK(graphs.plan().max_frames_per_batch == 6);
  graphs.capture();
  RuntimeConfig eager_cfg = cfg;
  eager_cfg.use_graphs = false;
  Runtime eager(eager_cfg);
  // 20 two-frame videos of 8 rows: 8 items and 160 rows would fit a batch, 6
  // frames hold three videos.
  std::vector<eg_item_desc> videos;
  for (int i = 0; i < 20; ++i) videos.push_back(video(28, 28, 2, 100 + i));
  check_batch_equals_per_item(graphs, eager, videos);
  Stats s = graphs.stats();
  CHECK(s.graph_hits == 20);
  CHECK(s.batches_graph == 7);  // ceil(20 / 3)

  // A 9-frame video alone is over the bound: eager at its own frame count.
  std::vector<eg_item_desc> mix = {video(28, 28, 9, 7), video(28, 28, 2, 8), image(28, 28, 9)};
  check_batch_equals_per_item(graphs, eager, mix);
  s = graphs.stats();
  CHECK(reason_count(s, 0, EagerReason::TooManyFrames) == 1);
  CHECK(s.graph_misses == 1);
  CHECK(s.graph_hits == 22);
}

TEST_CASE("units: budgets count the plugin's path unit; log lines name it") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  CHECK(log.saw("global: [16, 64, 512] rows"));
  rt.capture();
  std::vector<Item> items;
  items.push_back(rt.make_item(image(14 * 5, 14 * 5, 1)));  // 25 rows: global 1, local 25
  items.push_back(rt.make_item(image(28, 28, 2)));          // 4 rows: global 1, local none
  CHECK(items[0].spec().path_tokens[0] == 1);
  CHECK(items[0].spec().path_tokens[1] == 25);
  rt.execute(items);
  const Stats s = rt.stats();
  REQUIRE(s.paths.size() == 2);
  CHECK(s.paths[0].unit == "rows");
  CHECK(s.paths[1].name == "local");
  CHECK(s.paths[0].real_tokens == 2);
  CHECK(s.paths[0].budget_tokens == 16);
  CHECK(s.paths[1].real_tokens == 25);
  CHECK(s.real_tokens == 27);
}

TEST_CASE("honest stats: an item is a hit only if every path it uses replayed") {
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  cfg.budgets.token_budgets = {16, 64};
  cfg.budgets.max_items_per_batch = 4;
  Runtime graphs(cfg);
  graphs.capture();
  cfg.use_graphs = false;
  Runtime eager(cfg);
  // Three small items use only the global path; the 100-row one also sends
  // 100 local rows, more than the local path's largest budget (64).
  check_batch_equals_per_item(
      graphs, eager,
      {image(28, 28, 1), image(28, 28, 2), image(28, 28, 3), image(14 * 10, 14 * 10, 4)});
  const Stats s = graphs.stats();
  CHECK(s.graph_hits == 3);
  CHECK(s.graph_misses == 1);
  CHECK(s.batches_graph == 1);
  CHECK(s.batches_mixed == 1);
  CHECK(s.batches_eager == 0);
  CHECK(s.paths[0].batches_graph == 2);
  CHECK(s.paths[0].batches_eager == 0);
  CHECK(s.paths[1].batches_graph == 0);
  CHECK(s.paths[1].batches_eager == 1);
  CHECK(reason_count(s, 1, EagerReason::TooLarge) == 1);
  CHECK(s.hit_rate == doctest::Approx(0.75));
}

TEST_CASE("honest stats: 24 items through two paths are 24 hits") {
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> items;
  for (int i = 0; i < 10; ++i) items.push_back(rt.make_item(image(14 * 5, 14 * 5, i)));
  for (int i = 0; i < 14; ++i) items.push_back(rt.make_item(image(28, 28, 50 + i)));
  rt.execute(items);
  const Stats s = rt.stats();
  CHECK(s.graph_hits == 24);
  CHECK(s.graph_misses == 0);
  CHECK(s.hit_rate == doctest::Approx(1.0));
  CHECK(s.batches_mixed == 0);
  CHECK(s.paths[1].batches_graph >= 1);
}

TEST_CASE("ExecuteMode::Eager runs every batch eagerly with the same rows") {
  RuntimeConfig cfg = toy_config("cpu", "toy_dual");
  set(cfg, "local_min_tokens", "20");
  cfg.budgets.token_budgets = {16, 64, 512};
  cfg.budgets.max_items_per_batch = 8;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> items;
  std::mt19937 rng(5);
  for (const auto& d : random_descs(rng, 12, 10)) items.push_back(rt.make_item(d));
  const Result planned = rt.execute(items);
  const Stats after_planned = rt.stats();
  CHECK(after_planned.graph_misses == 0);
  const Result eager = rt.execute(items, ExecuteMode::Eager);
  const Stats s = rt.stats();
  CHECK(s.graph_hits == after_planned.graph_hits);
  CHECK(s.graph_misses == 12);
  CHECK(s.batches_eager > 0);
  CHECK(s.batches_graph == after_planned.batches_graph);
  CHECK(reason_count(s, 0, EagerReason::GraphsOff) == s.paths[0].batches_eager);
  check_same_rows(planned, eager, 0);
  check_same_rows(planned, eager, 1);
}

TEST_CASE("override_padding: a wrong padding logic is applied from the next execute on") {
  RuntimeConfig cfg = toy_config("cpu");
  cfg.budgets.token_budgets = {64};
  cfg.budgets.max_items_per_batch = 4;
  Runtime rt(cfg);
  rt.capture();
  std::vector<Item> items;
  items.push_back(rt.make_item(image(28, 28, 1)));
  const std::vector<float> good = rt.execute(items).item_as_float(0);
  // cu_seqlens padded with zeros decreases: the toy's padding check fails.
  rt.override_padding("cu_seqlens", EG_PAD_ZERO);
  CHECK(contains(error_of([&] { rt.execute(items); }), "repeat-last padding missing"));
  // Eager runs pad the same way.
  CHECK(contains(error_of([&] { rt.execute(items, ExecuteMode::Eager); }),
                 "repeat-last padding missing"));
  rt.clear_padding_overrides();
  CHECK(rt.execute(items).item_as_float(0) == good);

  try {
    rt.override_padding("no_such_buffer", EG_PAD_ZERO);
    FAIL("an unknown buffer was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Input);
    CHECK(contains(e.what(), "no_such_buffer"));
    CHECK(contains(e.what(), "x, cu_seqlens"));
  }
}

TEST_CASE("poison_memory: rows a plugin claims but does not write show as NaN") {
  for (bool poison : {false, true}) {
    for (ExecuteMode mode : {ExecuteMode::Planned, ExecuteMode::Eager}) {
      RuntimeConfig cfg = toy_config("cpu");
      cfg.budgets.token_budgets = {64};
      cfg.budgets.max_items_per_batch = 4;
      cfg.poison_memory = poison;
      WrappedToy toy(cfg, false);
      toy.manager->capture();
      wrap::skip_last_row = true;  // x's last real row is claimed, never written
      const std::vector<Item> items = toy.make({image(28, 28, 1)});
      const std::vector<float> rows = toy.run(items, mode).item_as_float(0);
      const size_t hidden = 8;
      REQUIRE(rows.size() == 4 * hidden);
      bool nan = false;
      for (size_t d = 0; d < hidden; ++d) nan = nan || std::isnan(rows[3 * hidden + d]);
      INFO("poison " << poison << (mode == ExecuteMode::Eager ? ", eager" : ", graph"));
      CHECK(nan == poison);  // unpoisoned, a stale finite value hides the bug
      CHECK_FALSE(std::isnan(rows[0]));
    }
  }
}

// ---------------------------------------------------------------- capture phases (issue 15)

TEST_CASE("capture phases: recorded, non-negative, summing to capture_seconds, logged") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "64");
  cfg.budgets.token_budgets = {64, 512};
  cfg.budgets.max_items_per_batch = 4;
  for (const bool calibrate : {true, false}) {
    CAPTURE(calibrate);
    cfg.prefer_faster_path = calibrate;
    Runtime rt(cfg);
    rt.capture();
    const Stats s = rt.stats();
    const CapturePhases& p = s.capture_phases;
    double sum = 0.0;
    for (const double v :
         {p.prepare_device, p.warmup, p.capture, p.instantiate, p.calibrate, p.other}) {
      CHECK(v >= 0.0);
      sum += v;
    }
    CHECK(s.capture_seconds > 0.0);
    CHECK(sum <= s.capture_seconds + 1e-6);
    CHECK(sum >= s.capture_seconds - 1e-6);  // `other` is the remainder
    CHECK(p.warmup > 0.0);                   // one forward per graph before its capture
    CHECK(p.capture > 0.0);                  // the CPU backend's capture runs the forward
    CHECK(p.instantiate == 0.0);             // nothing to instantiate on the CPU
    CHECK((p.calibrate > 0.0) == calibrate);
    CHECK(log.saw("captured 2 graphs", "warm-up"));
    CHECK(log.saw("captured 2 graphs", calibrate ? "calibrate" : "other"));
  }
}

TEST_CASE("calibration: replay times from the warm-up forwards only when they can stand in") {
  const std::vector<int64_t> budgets{1024, 2048, 4096, 8192};
  // Clean warm-ups (a warm tuning cache): the middle graphs are not replayed
  // again; their estimates carry the last graph's replay/warm-up ratio.
  auto e = replay_estimates_from_warmups(budgets, {2.2, 4.1, 8.0, 16.2}, 2.0, 16.0);
  REQUIRE(e.size() == 4);
  CHECK(e[0] < 0.0);  // first and last were timed, not estimated
  CHECK(e[3] < 0.0);
  CHECK(e[1] == doctest::Approx(4.1 * 16.0 / 16.2));
  CHECK(e[2] == doctest::Approx(8.0 * 16.0 / 16.2));
  // The first graph's warm-up does not vote (an eager run of a short forward
  // pays launch gaps its replay does not).
  e = replay_estimates_from_warmups(budgets, {3.5, 4.1, 8.0, 16.2}, 2.0, 16.0);
  CHECK(e[1] == doctest::Approx(4.1 * 16.0 / 16.2));
  CHECK(e[2] == doctest::Approx(8.0 * 16.0 / 16.2));
  // Warm-ups that tuned GEMMs (a cold cache) are far slower than replays:
  // every graph is timed.
  for (const double v : replay_estimates_from_warmups(budgets, {9.0, 30.0, 55.0, 80.0}, 2.0, 16.0))
    CHECK(v < 0.0);
  // Nor when a warm-up is faster than its replay beyond the margin.
  for (const double v : replay_estimates_from_warmups(budgets, {2.0, 3.0, 6.0, 12.0}, 2.0, 16.0))
    CHECK(v < 0.0);
  // The bounds, just inside and just outside. The line through the timed
  // ends (0.5 ms at 1024, 16 ms at 8192) gives the middle graphs' expected
  // replays; with a short first warm-up the last ratio is the only scale.
  auto line = [&](size_t i) { return 0.5 + 15.5 * double(budgets[i] - 1024) / 7168.0; };
  auto with_scale = [&](double scale) {  // warm-ups whose estimates land on the line
    return replay_estimates_from_warmups(
        budgets, {0.4, line(1) / scale, line(2) / scale, 16.0 / scale}, 0.5, 16.0);
  };
  for (const double scale : {kWarmupScaleMin * 1.01, 1.0, kWarmupScaleMax * 0.99}) {
    CAPTURE(scale);
    e = with_scale(scale);
    CHECK(e[1] == doctest::Approx(line(1)));
    CHECK(e[2] == doctest::Approx(line(2)));
  }
  for (const double scale : {kWarmupScaleMin * 0.99, kWarmupScaleMax * 1.01}) {
    CAPTURE(scale);
    for (const double v : with_scale(scale)) CHECK(v < 0.0);
  }
  auto off_line = [&](double factor) {  // the middle estimate `factor` times the line
    return replay_estimates_from_warmups(budgets, {0.4, line(1), line(2) * factor, 16.0}, 0.5,
                                         16.0)[2];
  };
  CHECK(off_line(kWarmupOutlier * 0.99) > 0.0);
  CHECK(off_line(1.0 / (kWarmupOutlier * 0.99)) > 0.0);
  CHECK(off_line(kWarmupOutlier * 1.01) < 0.0);          // slowed by a first-use cost
  CHECK(off_line(1.0 / (kWarmupOutlier * 1.01)) < 0.0);  // suspiciously fast
  // One middle warm-up slowed down (a kernel's module loaded on first use):
  // that graph is timed, the other estimated.
  e = replay_estimates_from_warmups(budgets, {2.2, 9.0, 8.0, 16.2}, 2.0, 16.0);
  CHECK(e[1] < 0.0);
  CHECK(e[2] > 0.0);
  // Short warm-ups are timed (launch jitter), as is everything in a group of
  // two or when the last warm-up itself is short.
  e = replay_estimates_from_warmups(budgets, {0.4, 1.0, 8.0, 16.2}, 0.5, 16.0);
  CHECK(e[1] < 0.0);
  CHECK(e[2] > 0.0);
  for (const double v : replay_estimates_from_warmups({64, 128}, {5.0, 9.0}, 5.0, 9.0))
    CHECK(v < 0.0);
  for (const double v : replay_estimates_from_warmups(budgets, {0.2, 0.5, 1.0, 1.5}, 0.2, 1.4))
    CHECK(v < 0.0);
  // NaN anywhere never becomes an estimate; nor does a warm-up list of the
  // wrong length.
  for (const double v : replay_estimates_from_warmups(budgets, {2.2, NAN, 8.0, NAN}, 2.0, 16.0))
    CHECK(v < 0.0);
  CHECK(replay_estimates_from_warmups(budgets, {2.2, NAN, 8.0, 16.2}, 2.0, 16.0)[1] < 0.0);
  for (const double v : replay_estimates_from_warmups(budgets, {2.2, 4.1, 8.0, 16.2}, NAN, 16.0))
    CHECK(v < 0.0);
  for (const double v : replay_estimates_from_warmups(budgets, {2.2, 4.1, 8.0, 16.2}, 2.0, NAN))
    CHECK(v < 0.0);
  for (const double v : replay_estimates_from_warmups(budgets, {2.2, 4.1}, 2.0, 16.0))
    CHECK(v < 0.0);
}

TEST_CASE("calibration: a forward that costs by budget has its middle replays estimated") {
  LogCapture log;
  RuntimeConfig cfg = toy_config("cpu");
  set(cfg, "hidden", "16");
  // 2 ms per 1024 tokens: 2, 8, 16, 24 and 32 ms forwards, warm-ups equal to
  // replays, so every middle graph takes its warm-up's time.
  cfg.budgets.token_budgets = {1024, 4096, 8192, 12288, 16384};
  cfg.budgets.max_items_per_batch = 4;
  cfg.prefer_faster_path = true;
  auto timing = std::make_shared<ModelledTiming>();
  WrappedToy toy(cfg, false, timing);
  toy.manager->capture();
  const std::string line = log.find("captured 5 graphs");
  REQUIRE_FALSE(line.empty());
  int timed = -1, estimated = -1;
  REQUIRE(std::sscanf(line.c_str() + line.find("calibrate"), "calibrate %*f: %d replays timed, %d",
                      &timed, &estimated) == 2);
  CHECK(timed == 2);  // the first and last of the group
  CHECK(estimated == 3);
  // The model decides with them: a batch that fills a middle budget exactly
  // replays its graph (eager at the same size is no faster).
  std::vector<eg_item_desc> descs;
  for (uint64_t i = 0; i < 4; ++i) descs.push_back(image(14 * 32, 14 * 64, i));  // 2048
  const Result r = toy.run(toy.make(descs));
  CHECK(r.rows(0) == 2048);
  CHECK(toy.manager->stats().batches_graph == 1);
  CHECK(toy.manager->stats().batches_eager_chosen == 0);

  // A middle warm-up slowed by a first-use cost (twice its replay): that
  // graph alone is timed again.
  struct SlowWarmup final : RunTiming {
    ModelledTiming inner;
    double time_ms(const TimedRun& run, const std::function<void()>& enqueue) override {
      const double ms = inner.time_ms(run, enqueue);
      const bool slow = run.work == TimedWork::Warmup && run.shape.token_budget == 8192;
      return slow ? 2.0 * ms : ms;
    }
    std::unique_ptr<StreamTimer> make_timer(const TimedRun& run) override {
      return inner.make_timer(run);
    }
  };
  WrappedToy slow(cfg, false, std::make_shared<SlowWarmup>());
  slow.manager->capture();
  const std::string slow_line = log.find("captured 5 graphs");
  REQUIRE(std::sscanf(slow_line.c_str() + slow_line.find("calibrate"),
                      "calibrate %*f: %d replays timed, %d", &timed, &estimated) == 2);
  CHECK(timed == 3);
  CHECK(estimated == 2);
}

TEST_CASE(
    "eager feedback rule: a chosen eager run no faster than the replay withdraws the choice") {
  CapturedGraph g;
  g.replay_ms = 10.0;
  const int64_t never = std::numeric_limits<int64_t>::max();
  CHECK_FALSE(eager_choice_withdrawn(g, 5000, 9.0));  // faster, as expected
  CHECK(g.eager_not_faster_from == never);
  CHECK_FALSE(eager_choice_withdrawn(g, 5000, std::nan("")));  // no figure
  CHECK(g.eager_not_faster_from == never);
  CHECK(eager_choice_withdrawn(g, 5000, 10.0));
  CHECK(g.eager_not_faster_from == 5000);
  CHECK(eager_choice_withdrawn(g, 7000, 12.0));  // larger: the smaller size stays the bound
  CHECK(g.eager_not_faster_from == 5000);
  CHECK(eager_choice_withdrawn(g, 3000, 15.0));
  CHECK(g.eager_not_faster_from == 3000);
}

// One 5120-token item against budgets 1024/4096/32768 with forwards of 2 ms
// per 1024 tokens: the cost model expects an eager run at 5120 (~10 ms, plus
// the eager overhead it measured at 1024) to beat replaying 32768 (64 ms).
struct EagerChoice {
  std::shared_ptr<ModelledTiming> timing = std::make_shared<ModelledTiming>();
  WrappedToy toy;
  explicit EagerChoice(double eager_ms_per_1k) : toy(config(), false, timing) {
    timing->eager_ms_per_1k = eager_ms_per_1k;
  }
  static RuntimeConfig config() {
    RuntimeConfig cfg = toy_config("cpu");
    set(cfg, "hidden", "16");
    cfg.budgets.token_budgets = {1024, 4096, 32768};
    cfg.budgets.max_items_per_batch = 4;
    cfg.prefer_faster_path = true;
    return cfg;
  }
  Stats stats() const { return toy.manager->stats(); }
};

TEST_CASE("a chosen eager run that was not faster sends later batches back to the graph") {
  LogCapture log;
  // Eager runs cost 20 ms more per 1024 tokens: 22 ms at 1024, where the
  // model measures its overhead (20 ms), so it expects ~30 ms at 5120 against
  // the 64 ms replay; the run takes 110 ms.
  EagerChoice ec(20.0);
  WrappedToy& toy = ec.toy;
  toy.manager->capture();
  std::vector<Item> items = toy.make({image(14 * 64, 14 * 80, 1)});  // 5120 tokens
  const Result first = toy.run(items);
  CHECK(first.rows(0) == 5120);
  CHECK(ec.stats().batches_eager_chosen == 1);  // the estimate's choice
  // Its timing came back: the next batch of that size replays the graph, and
  // so does a larger one; the results are the same either way.
  const Result second = toy.run(items);
  CHECK(ec.stats().batches_eager_chosen == 1);
  CHECK(ec.stats().batches_graph == 1);
  CHECK(first.item_as_float(0) == second.item_as_float(0));
  CHECK_FALSE(log.find("replays such batches from now on").empty());
  std::vector<Item> more = toy.make({image(14 * 64, 14 * 32, 2)});  // 2048 more
  items.push_back(std::move(more.front()));
  toy.run(items);
  CHECK(ec.stats().batches_eager_chosen == 1);
  CHECK(ec.stats().batches_graph == 2);
  // A new capture calibrates afresh: eager is chosen again. Its timing, still
  // unread when the next capture comes, must not judge that capture's graphs.
  items.pop_back();
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    toy.manager->capture();
    toy.run(items);
    CHECK(ec.stats().batches_eager_chosen == 2 + round);
  }
  // And read at the next batch, it does withdraw the choice again.
  toy.run(items);
  CHECK(ec.stats().batches_eager_chosen == 3);
}

TEST_CASE("a chosen eager run that was faster keeps being chosen") {
  LogCapture log;
  EagerChoice ec(0.0);  // eager at 5120: 10 ms against 64
  ec.toy.manager->capture();
  const std::vector<Item> items = ec.toy.make({image(14 * 64, 14 * 80, 1)});
  for (int i = 0; i < 3; ++i) ec.toy.run(items);
  CHECK(ec.stats().batches_eager_chosen == 3);
  CHECK(ec.stats().batches_graph == 0);
  CHECK(log.find("replays such batches from now on").empty());
}

TEST_CASE("calibration timing: one timed run when long, else the median of 3 more") {
  // `times` are what successive runs take (ms); `runs` counts them.
  auto timer = [](std::vector<double> times, int& runs) {
    return [times = std::move(times), &runs] { return times.at(static_cast<size_t>(runs++)); };
  };
  int runs = 0;
  // Long: one run, no warm-up unless asked for.
  CHECK(calibration_time_ms(timer({30.0, 1.0, 1.0, 1.0}, runs), false) == doctest::Approx(30.0));
  CHECK(runs == 1);
  runs = 0;
  CHECK(calibration_time_ms(timer({kShortRunMs, 1.0, 1.0, 1.0}, runs), false) ==
        doctest::Approx(kShortRunMs));
  CHECK(runs == 1);
  runs = 0;
  // A warm-up (its first-run costs) is not counted.
  CHECK(calibration_time_ms(timer({90.0, 30.0, 1.0, 1.0, 1.0}, runs), true) ==
        doctest::Approx(30.0));
  CHECK(runs == 2);
  runs = 0;
  // Short: launch jitter matters; the first run was the warm-up, and the
  // median of three more ignores one outlier.
  CHECK(calibration_time_ms(timer({0.5, 5.0, 0.4, 0.45}, runs), false) == doctest::Approx(0.45));
  CHECK(runs == 4);
  runs = 0;
  CHECK(calibration_time_ms(timer({3.0, 0.5, 0.3, 1.9, 0.2}, runs), true) == doctest::Approx(0.3));
  CHECK(runs == 5);
}
