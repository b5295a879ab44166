// The toy plugins (SDK) at ABI 1.2, through their plugin table (size-safe
// writes, host-staged capture, frame buffers, specs from descriptions) and
// through the C++ API (the "pooled" output, Runtime::spec_for), and the ABI
// conformance plugin (raw C ABI, tests/plugins/abi_conformance_plugin.cpp)
// under its three names: toy_faults carries the fault switches the shipped toy
// does not accept; toy_badpad pads cu_seqlens with zeros, which gives 100%
// graph hits and wrong rows that only repeat-last fixes; toy_v1_1 keeps an ABI
// 1.1 table (no item_spec_for_desc), so the runtime's fallback runs.
#include "spec_for_checks.hpp"
#include "test_support.hpp"

#include <encgraph/plugin_api.h>
#include <encgraph/runtime.hpp>

#include <dlfcn.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace encgraph;
using namespace encgraph::test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A host of ABI 1.0: no item sizes, so the plugin must assume 1.0's.
const eg_host_api kHost10 = {1, 0, EG_HOST_API_V1_0_SIZE, 0, nullptr, nullptr, 0, 0, nullptr};
// This runtime's host (an SDK plugin declines a 1.0 one).
const eg_host_api kHost = {EG_ABI_VERSION_MAJOR,
                           EG_ABI_VERSION_MINOR,
                           sizeof(eg_host_api),
                           0,
                           nullptr,
                           nullptr,
                           sizeof(eg_item_desc),
                           sizeof(eg_item_spec),
                           nullptr};

bool sdk_toy(const std::string& name) {
  return name == "toy" || name == "toy_dual";
}

// The entry of build-tree plugin `name` (shipped or test plugin folder),
// called with `host`. The library stays loaded (as the runtime keeps plugins).
const eg_plugin_api* entry_table(const std::string& name, const eg_host_api* host) {
  std::string path;
  for (const auto& dir : plugin_dirs()) {
    path = dir.string() + "/libencgraph_" + name + ".so";
    if (std::filesystem::exists(path)) break;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(handle, path);
  auto entry = reinterpret_cast<eg_plugin_entry_fn>(dlsym(handle, EG_PLUGIN_ENTRY_SYMBOL));
  REQUIRE_MESSAGE((entry != nullptr), path);
  return entry(host);
}

// The table of `name`: the conformance plugin's through a 1.0 host (no item
// sizes, so it must assume 1.0's), the SDK toys' through this runtime's.
const eg_plugin_api* table(const std::string& name) {
  const eg_plugin_api* api = entry_table(name, sdk_toy(name) ? &kHost : &kHost10);
  REQUIRE(api);
  return api;
}

// An instance made through the table directly, destroyed with the object.
struct Direct {
  const eg_plugin_api* api;
  eg_instance* inst = nullptr;
  eg_error err{};
  explicit Direct(const std::string& name, const std::vector<eg_config_entry>& config = {})
      : api(table(name)) {
    eg_create_params p{};
    p.struct_size = sizeof(p);
    p.device = EG_DEVICE_CPU;
    p.config = config.data();
    p.num_config = static_cast<int64_t>(config.size());
    REQUIRE_MESSAGE(api->create(&p, &inst, &err) == EG_OK, err.message);
  }
  ~Direct() { api->destroy(inst); }
  eg_item* item(const eg_item_desc& d) {
    eg_item* it = nullptr;
    REQUIRE_MESSAGE(api->item_create(inst, &d, &it, &err) == EG_OK, err.message);
    return it;
  }
};

// Host staging for every buffer of a graph, shaped as the plugin asks.
struct Staging {
  std::vector<std::vector<int32_t>> memory;  // every toy buffer has 4-byte elements
  std::vector<eg_replay_buffer> bufs;
  Staging(Direct& d, const eg_graph_shape& shape, const eg_model_info& mi) {
    const int32_t num_buffers = mi.num_buffers;
    memory.resize(static_cast<size_t>(num_buffers));
    bufs.resize(static_cast<size_t>(num_buffers));
    for (int32_t b = 0; b < num_buffers; ++b) {
      eg_tensor t{};
      REQUIRE(d.api->buffer_shape(d.inst, &shape, b, &t, &d.err) == EG_OK);
      int64_t n = 1;
      for (int32_t k = 0; k < t.ndim; ++k) n *= t.shape[k];
      memory[b].assign(static_cast<size_t>(n), 0x5A5A5A5A);  // stale bytes
      bufs[b].staging = t;
      bufs[b].staging.data = memory[b].data();
      bufs[b].staging.dtype = mi.buffers[b].dtype;
      bufs[b].staging.device = EG_DEVICE_CPU;
      bufs[b].rows = -1;
    }
  }
};

eg_graph_shape graph(int64_t budget, int64_t max_batch, int64_t max_frames) {
  eg_graph_shape s{};
  s.token_budget = budget;
  s.max_batch_size = max_batch;
  s.max_frames_per_batch = max_frames;
  return s;
}

int32_t buffer_index(const eg_model_info& mi, const std::string& name) {
  for (int32_t b = 0; b < mi.num_buffers; ++b)
    if (name == mi.buffers[b].name) return b;
  FAIL("no buffer " << name);
  return -1;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0.0f;
  for (size_t k = 0; k < a.size(); ++k) m = std::max(m, std::fabs(a[k] - b[k]));
  return m;
}

}  // namespace

TEST_CASE("the toys are ABI 1.4 tables with host-staged capture and named outputs") {
  for (const char* name : {"toy", "toy_dual", "toy_faults", "toy_badpad", "toy_v1_1"}) {
    CAPTURE(name);
    const eg_plugin_api* api = table(name);
    const bool v1_1 = std::string(name) == "toy_v1_1";
    CHECK(api->abi_minor == (v1_1 ? 1u : EG_ABI_VERSION_MINOR));
    CHECK(api->struct_size == (v1_1 ? EG_PLUGIN_API_V1_1_SIZE : EG_PLUGIN_API_V1_4_SIZE));
    // The SDK toys make items from their options alone; the conformance
    // plugin's fault counters are global, so it makes them one at a time.
    const bool sdk_toy = std::string(name) == "toy" || std::string(name) == "toy_dual";
    if (!v1_1) CHECK(((api->flags & EG_PLUGIN_CONCURRENT_ITEMS) != 0) == sdk_toy);
    if (!v1_1) CHECK((api->item_spec_for_desc != nullptr));
    CHECK((api->prepare_capture_inputs == nullptr));  // no device code on the capture path
    CHECK((api->prepare_capture_staging != nullptr));
    CHECK((api->output_shape_at != nullptr));
    CHECK(api->name == std::string(name));
  }
  CHECK((table("toy")->postprocess_outputs == nullptr));  // the runtime's copy
  CHECK((table("toy_dual")->postprocess_outputs != nullptr));
  // SDK plugins need a 1.1 runtime (host-staged capture): 1.0's postprocess
  // would never run, and their entry declines a 1.0 host.
  CHECK((table("toy_dual")->postprocess == nullptr));
  CHECK((entry_table("toy", &kHost10) == nullptr));
  CHECK((entry_table("toy_faults", &kHost10) != nullptr));  // the raw table serves 1.0 too
}

TEST_CASE("model_info writes only the fields the runtime's struct_size covers") {
  for (const char* name : {"toy", "toy_faults"}) {
    CAPTURE(name);
    Direct d(name);
    alignas(eg_model_info) unsigned char raw[sizeof(eg_model_info)];
    std::memset(raw, 0xAB, sizeof(raw));
    auto* v10 = reinterpret_cast<eg_model_info*>(raw);
    v10->struct_size = EG_MODEL_INFO_V1_0_SIZE;  // a 1.0 runtime's struct
    REQUIRE(d.api->model_info(d.inst, v10, &d.err) == EG_OK);
    CHECK(v10->num_paths == 1);
    CHECK(v10->num_buffers == 6);
    CHECK(v10->out_hidden_size == 8);
    bool untouched = true;
    for (size_t k = EG_MODEL_INFO_V1_0_SIZE; k < sizeof(raw); ++k) untouched &= raw[k] == 0xAB;
    CHECK(untouched);

    eg_model_info full{};
    full.struct_size = sizeof(full);
    REQUIRE(d.api->model_info(d.inst, &full, &d.err) == EG_OK);
    REQUIRE(full.num_outputs == 2);
    CHECK(full.outputs[0].name == std::string("rows"));
    CHECK(full.outputs[0].width == full.out_hidden_size);
    CHECK(full.outputs[0].dtype == full.out_dtype);
    CHECK(full.outputs[0].rows_per_item == 0);
    CHECK(full.outputs[1].name == std::string("pooled"));
    CHECK(full.outputs[1].rows_per_item == 1);
    CHECK(full.path_units[0] == std::string("rows"));
  }
  // The raw table refuses a struct smaller than any ABI's (the SDK copies what
  // fits, sdk/tests).
  Direct d("toy_faults");
  eg_model_info tiny{};
  tiny.struct_size = 100;
  CHECK(d.api->model_info(d.inst, &tiny, &d.err) == EG_ERR_INVALID_ARGUMENT);
  CHECK(tiny.num_paths == 0);
}

TEST_CASE("item_spec writes path_tokens for every path, within eg_item_spec") {
  for (const char* name : {"toy", "toy_dual"}) {
    CAPTURE(name);
    Direct d(name);
    eg_item* it = d.item(image(14 * 3, 14 * 4, 1));  // 12 tokens
    unsigned char raw[sizeof(eg_item_spec) + 16];
    std::memset(raw, 0xCD, sizeof(raw));
    auto* spec = reinterpret_cast<eg_item_spec*>(raw);
    REQUIRE(d.api->item_spec(d.inst, it, spec, &d.err) == EG_OK);
    if (std::string(name) == "toy") {
      CHECK(spec->path_tokens[0] == 12);
      CHECK(spec->output_tokens == 12);
    } else {
      CHECK(spec->path_tokens[0] == 1);
      CHECK(spec->path_tokens[1] == 12);
      CHECK(spec->output_tokens == 13);
    }
    CHECK(spec->path_tokens[3] == 0);
    CHECK(spec->frames == 1);
    bool untouched = true;
    for (size_t k = sizeof(eg_item_spec); k < sizeof(raw); ++k) untouched &= raw[k] == 0xCD;
    CHECK(untouched);
    d.api->item_destroy(d.inst, it);
  }
}

TEST_CASE("item_spec_for_desc writes what item_spec writes, within eg_item_spec, pixels unread") {
  for (const char* name : {"toy", "toy_dual"}) {
    CAPTURE(name);
    Direct d(name);
    for (const eg_item_desc& desc :
         {image(14 * 3, 14 * 4, 1), video(29, 57, 3, 2), image(5, 9, 3)}) {
      eg_item* it = d.item(desc);
      eg_item_spec made{};
      REQUIRE(d.api->item_spec(d.inst, it, &made, &d.err) == EG_OK);
      d.api->item_destroy(d.inst, it);
      unsigned char raw[sizeof(eg_item_spec) + 16];
      std::memset(raw, 0xCD, sizeof(raw));
      auto* asked = reinterpret_cast<eg_item_spec*>(raw);
      eg_item_desc no_pixels = desc;
      no_pixels.pixels = reinterpret_cast<const uint8_t*>(uintptr_t{8});  // never dereferenced
      REQUIRE(d.api->item_spec_for_desc(d.inst, &no_pixels, asked, &d.err) == EG_OK);
      CHECK(std::memcmp(asked, &made, sizeof(made)) == 0);
      bool untouched = true;
      for (size_t k = sizeof(eg_item_spec); k < sizeof(raw); ++k) untouched &= raw[k] == 0xCD;
      CHECK(untouched);
    }
    eg_item_spec spec{};
    const eg_item_desc bad = image(0, 14, 1);
    CHECK(d.api->item_spec_for_desc(d.inst, &bad, &spec, &d.err) == EG_ERR_INVALID_ARGUMENT);
    CHECK(contains(d.err.message, "item geometry must be positive, got 0x14x1"));
  }
}

TEST_CASE("spec_for equals make_item's spec for random geometries (toy, toy_dual)") {
  for (const char* name : {"toy", "toy_dual"}) {
    CAPTURE(name);
    RuntimeConfig c = toy_config("cpu", name);
    if (std::string(name) == "toy_dual") set(c, "local_min_tokens", "20");  // both path choices
    Runtime rt(c);
    CHECK(rt.has_spec_for_desc());
    const SpecForTally t = check_spec_for(rt, 11, 120);
    CHECK(t.agreed > 60);
    CHECK(t.refused > 5);
  }
}

TEST_CASE("a 1.1 plugin without item_spec_for_desc: spec_for makes a synthetic item") {
  Runtime rt(toy_config("cpu", "toy_v1_1"));
  CHECK_FALSE(rt.has_spec_for_desc());
  const SpecForTally t = check_spec_for(rt, 12, 80);
  CHECK(t.agreed > 40);
  CHECK(t.refused > 3);
  // And it still runs: its rows equal the shipped toy's (1.2) for the same items.
  Runtime toy(toy_config("cpu"));
  std::vector<Item> a, b;
  for (const eg_item_desc& desc : {image(28, 42, 1), video(28, 28, 3, 2)}) {
    a.push_back(rt.make_item(desc));
    b.push_back(toy.make_item(desc));
    CHECK(spec_string(rt.spec_for(desc)) == spec_string(a.back().spec()));
  }
  rt.capture();
  toy.capture();
  const Result ra = rt.execute(a), rb = toy.execute(b);
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(max_abs_diff(ra.item_as_float(i), rb.item_as_float(i)) < 1e-5f);
  const std::string msg = error_of([&] { rt.spec_for(image(-3, 14, 1)); });
  CHECK(contains(msg, "plugin 'toy_v1_1': item_create failed (invalid argument)"));
}

TEST_CASE("toy_faults' spec switches make item_spec_for_desc lie or fail (verify's targets)") {
  RuntimeConfig c = toy_config("cpu", "toy_faults");
  set(c, "spec_for_desc_skew", "3");
  Runtime skewed(c);
  const eg_item_desc d = image(28, 28, 1);
  CHECK(skewed.spec_for(d).input_size == skewed.make_item(d).spec().input_size + 3);
  c = toy_config("cpu", "toy_faults");
  set(c, "fail_spec_for_desc", "true");
  Runtime failing(c);
  CHECK(contains(error_of([&] { failing.spec_for(d); }),
                 "plugin 'toy_faults': item_spec_for_desc failed (invalid argument): "
                 "item_spec_for_desc asked to fail"));
}

TEST_CASE("frame buffers are sized from max_frames_per_batch; more frames are refused") {
  Direct d("toy");
  eg_model_info mi{};
  mi.struct_size = sizeof(mi);
  REQUIRE(d.api->model_info(d.inst, &mi, &d.err) == EG_OK);
  const int32_t frames = buffer_index(mi, "frame_first_row");
  CHECK(mi.buffers[frames].padding_logic == EG_PAD_REPEAT_LAST);
  // 8 items of up to 8 frames: 5 frames, not 8 x 8, bound the buffer.
  const eg_graph_shape s = graph(256, 8, 5);
  eg_tensor t{};
  REQUIRE(d.api->buffer_shape(d.inst, &s, frames, &t, &d.err) == EG_OK);
  CHECK(t.shape[0] == 5 + 1);

  eg_item* a = d.item(video(28, 28, 2, 1));  // 2 frames of 4 rows
  eg_item* b = d.item(image(28, 14, 2));     // 2 rows, no video frame
  eg_item* c = d.item(video(28, 14, 3, 3));  // 3 frames of 2 rows
  {
    const eg_item* batch[] = {a, b, c};
    Staging st(d, s, mi);
    REQUIRE_MESSAGE(d.api->prepare_replay_buffers(d.inst, &s, batch, 3, st.bufs.data(),
                                                  mi.num_buffers, &d.err) == EG_OK,
                    d.err.message);
    CHECK(st.bufs[frames].rows == 6);
    CHECK(st.memory[frames] == std::vector<int32_t>{0, 4, 10, 12, 14, 16});
  }
  {
    eg_item* e = d.item(video(28, 14, 1, 4));  // the sixth frame
    const eg_item* batch[] = {a, b, c, e};
    Staging st(d, s, mi);
    CHECK(d.api->prepare_replay_buffers(d.inst, &s, batch, 4, st.bufs.data(), mi.num_buffers,
                                        &d.err) == EG_ERR_INVALID_ARGUMENT);
    CHECK(contains(d.err.message, "6 video frames, more than max_frames_per_batch 5"));
    d.api->item_destroy(d.inst, e);
  }
  for (eg_item* it : {a, b, c}) d.api->item_destroy(d.inst, it);
}

TEST_CASE("capture inputs are host staging: a full batch, every buffer's rows set") {
  Direct d("toy");
  eg_model_info mi{};
  mi.struct_size = sizeof(mi);
  REQUIRE(d.api->model_info(d.inst, &mi, &d.err) == EG_OK);
  const eg_graph_shape s = graph(64, 4, 8);
  Staging st(d, s, mi);
  REQUIRE(d.api->prepare_capture_staging(d.inst, &s, st.bufs.data(), mi.num_buffers, &d.err) ==
          EG_OK);
  const int32_t cu = buffer_index(mi, "cu_seqlens");
  CHECK(st.bufs[cu].rows == 5);
  CHECK(st.memory[cu] == std::vector<int32_t>{0, 16, 32, 48, 64});
  CHECK(st.bufs[buffer_index(mi, "x")].rows == 64);
  CHECK(st.bufs[buffer_index(mi, "bias")].rows == 1);
  float bias = 0;
  std::memcpy(&bias, st.memory[buffer_index(mi, "bias")].data(), sizeof(bias));
  CHECK(bias == 0.5f);
}

TEST_CASE("the shipped toy refuses the test fault switches; toy_faults takes them") {
  for (const char* key :
       {"fail_forward_at", "illegal_sync", "huge_workspace_from", "workspace_per_token"}) {
    CAPTURE(key);
    RuntimeConfig shipped = toy_config("cpu");
    set(shipped, key, std::string(key) == "illegal_sync" ? "false" : "0");
    const std::string msg = error_of([&] { Runtime rt(shipped); });
    CHECK(contains(msg, "toy: unknown config key '" + std::string(key) + "' in [plugin.config]"));
    RuntimeConfig faults = toy_config("cpu", "toy_faults");
    set(faults, key, std::string(key) == "illegal_sync" ? "false" : "0");
    CHECK(error_of([&] { Runtime rt(faults); }) == "");
  }
  RuntimeConfig faults = toy_config("cpu", "toy_faults");
  set(faults, "fail_forward_at", "-1");
  CHECK(contains(error_of([&] { Runtime rt(faults); }), "'fail_forward_at' = -1 is outside"));
}

TEST_CASE("pooled: one row per item, the mean of the item's rows, replayed and eager") {
  for (const char* name : {"toy", "toy_dual"}) {
    CAPTURE(name);
    RuntimeConfig cfg = toy_config("cpu", name);
    cfg.budgets.token_budgets = {64, 256};
    cfg.budgets.max_items_per_batch = 8;
    Runtime rt(cfg);
    REQUIRE(rt.outputs().size() == 2);
    CHECK(rt.outputs()[0].name == "rows");
    CHECK(rt.outputs()[1].name == "pooled");
    rt.capture();
    std::vector<Item> items;
    items.push_back(rt.make_item(image(14 * 4, 14 * 5, 1)));
    items.push_back(rt.make_item(image(14, 14 * 2, 2)));  // 2 tokens: skips toy_dual's local path
    items.push_back(rt.make_item(video(28, 28, 3, 3)));
    for (ExecuteMode mode : {ExecuteMode::Planned, ExecuteMode::Eager}) {
      const Result r = rt.execute(items, mode);
      REQUIRE(r.num_outputs() == 2);
      for (size_t i = 0; i < items.size(); ++i) {
        CAPTURE(i);
        REQUIRE(r.rows(i, 1) == 1);
        const std::vector<float> rows = r.item_as_float(i, 0), pooled = r.item_as_float(i, 1);
        const size_t hidden = 8, n = rows.size() / hidden;
        REQUIRE(n == static_cast<size_t>(r.rows(i, 0)));
        for (size_t c = 0; c < hidden; ++c) {
          float sum = 0;
          for (size_t k = 0; k < n; ++k) sum += rows[k * hidden + c];
          CHECK(pooled[c] == doctest::Approx(sum / static_cast<float>(n)).epsilon(1e-5));
        }
      }
    }
    CHECK(rt.stats().graph_hits == 3);
  }
}

TEST_CASE("toy_badpad: 100% graph hits and wrong rows; repeat-last padding fixes them") {
  RuntimeConfig cfg = toy_config("cpu", "toy_badpad");
  cfg.budgets.token_budgets = {256};
  cfg.budgets.max_items_per_batch = 8;
  Runtime bad(cfg);
  bad.capture();
  RuntimeConfig good_cfg = cfg;
  good_cfg.plugin = "toy";
  Runtime good(good_cfg);
  const std::vector<eg_item_desc> descs = {image(14 * 4, 14 * 5, 1), image(14 * 3, 14 * 6, 2),
                                           image(14 * 7, 14 * 2, 3)};
  std::vector<Item> items, good_items;
  for (const auto& d : descs) {
    items.push_back(bad.make_item(d));
    good_items.push_back(good.make_item(d));
  }
  const Result replayed = bad.execute(items);
  const Stats s = bad.stats();
  CHECK(s.graph_hits == 3);
  CHECK(s.graph_misses == 0);
  CHECK(s.hit_rate == doctest::Approx(1.0));

  // Each item alone, eagerly at its exact size: right (the shipped toy's rows).
  const Result reference = good.execute(good_items, ExecuteMode::Eager);
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < items.size(); ++i) {
    alone.push_back(
        bad.execute(std::vector<const Item*>{&items[i]}, ExecuteMode::Eager).item_as_float(0));
    CHECK(max_abs_diff(alone[i], reference.item_as_float(i)) < 1e-5f);
  }
  // The replayed batch: the item the packer put first is right, the others
  // silently wrong.
  int right = 0;
  float worst = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const float diff = max_abs_diff(replayed.item_as_float(i), alone[i]);
    right += diff < 1e-5f;
    worst = std::max(worst, diff);
  }
  MESSAGE("toy_badpad: largest difference replayed vs alone " << worst);
  CHECK(right == 1);
  CHECK(worst > 0.1f);

  // The padding verify would suggest: the same graphs now give the right rows.
  bad.override_padding("cu_seqlens", EG_PAD_REPEAT_LAST);
  const Result fixed = bad.execute(items);
  for (size_t i = 0; i < items.size(); ++i)
    CHECK(max_abs_diff(fixed.item_as_float(i), alone[i]) < 1e-5f);
  CHECK(bad.stats().graph_hits == 6);
}
