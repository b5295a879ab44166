// The façade's plugin-facing rules, with an in-process fake plugin table: model
// info normalised (1.0 and 1.1) and validated, 1.1 and 1.2 table entries read
// only inside the table's struct_size, item specs checked, specs from a
// description (1.2, or a synthetic item before it); the loader's rule on
// prepare_capture_inputs / prepare_capture_staging; statistics summed.
#include "plugin_instance.hpp"
#include "plugin_probe.hpp"
#include "test_support.hpp"

#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>
#include <encgraph/stats.hpp>

#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>

using namespace encgraph;

namespace {

// What the fake plugin says and how often it was asked.
struct Fake {
  eg_model_info info{};
  eg_item_spec spec{};
  int creates = 0, destroys = 0, items = 0, item_destroys = 0;
  eg_status item_status = EG_OK;  // what item_create and item_spec_for_desc return
  eg_item_spec desc_spec{};       // what item_spec_for_desc writes
  int spec_for_desc_calls = 0;
  const uint8_t* last_pixels = nullptr;  // desc->pixels of the last item_create / spec call
};
Fake g;
int g_instance_tag = 0;

eg_status fake_create(const eg_create_params*, eg_instance** out, eg_error*) {
  ++g.creates;
  *out = reinterpret_cast<eg_instance*>(&g_instance_tag);
  return EG_OK;
}
void fake_destroy(eg_instance*) {
  ++g.destroys;
}
// Copies the whole scenario, 1.1 fields included, as a careless plugin would:
// the runtime must still ignore them for a 1.0 table.
eg_status fake_model_info(eg_instance*, eg_model_info* out, eg_error*) {
  std::memcpy(out, &g.info, sizeof(g.info));
  return EG_OK;
}
eg_status fake_budget_range(eg_instance*, int64_t* lo, int64_t* hi, eg_error*) {
  *lo = 16;
  *hi = 64;
  return EG_OK;
}
eg_status fake_item_create(eg_instance*, const eg_item_desc* d, eg_item** out, eg_error* err) {
  g.last_pixels = d->pixels;
  if (g.item_status != EG_OK) {
    std::snprintf(err->message, sizeof(err->message), "height %lld is refused",
                  static_cast<long long>(d->height));
    return g.item_status;
  }
  ++g.items;
  *out = reinterpret_cast<eg_item*>(&g_instance_tag);
  return EG_OK;
}
eg_status fake_spec_for_desc(eg_instance*, const eg_item_desc* d, eg_item_spec* out,
                             eg_error* err) {
  ++g.spec_for_desc_calls;
  g.last_pixels = d->pixels;
  if (g.item_status != EG_OK) {
    std::snprintf(err->message, sizeof(err->message), "height %lld is refused",
                  static_cast<long long>(d->height));
    return g.item_status;
  }
  *out = g.desc_spec;
  return EG_OK;
}
void fake_item_destroy(eg_instance*, eg_item*) {
  ++g.item_destroys;
}
eg_status fake_item_spec(eg_instance*, const eg_item*, eg_item_spec* out, eg_error*) {
  *out = g.spec;
  return EG_OK;
}
eg_status fake_shape(eg_instance*, const eg_graph_shape*, int32_t, eg_tensor*, eg_error*) {
  return EG_OK;
}
eg_status fake_output_shape(eg_instance*, const eg_graph_shape*, eg_tensor*, eg_error*) {
  return EG_OK;
}
eg_status fake_workspace(eg_instance*, const eg_graph_shape*, size_t* bytes, eg_error*) {
  *bytes = 0;
  return EG_OK;
}
eg_status fake_replay(eg_instance*, const eg_graph_shape*, const eg_item* const*, int64_t,
                      eg_replay_buffer*, int32_t, eg_error*) {
  return EG_OK;
}
eg_status fake_forward(eg_instance*, const eg_forward_args*, eg_error*) {
  return EG_OK;
}
eg_status fake_staging(eg_instance*, const eg_graph_shape*, eg_replay_buffer*, int32_t, eg_error*) {
  return EG_OK;
}
eg_status fake_capture_inputs(eg_instance*, const eg_graph_shape*, const eg_tensor*, int32_t, void*,
                              eg_error*) {
  return EG_OK;
}
eg_status fake_postprocess_outputs(eg_instance*, const eg_tensor*, int32_t, int32_t,
                                   const eg_item* const*, int64_t, const eg_tensor*, void*,
                                   eg_error*) {
  return EG_OK;
}

eg_plugin_api fake_table(uint32_t minor, uint32_t size) {
  eg_plugin_api api{};
  api.abi_major = EG_ABI_VERSION_MAJOR;
  api.abi_minor = minor;
  api.struct_size = size;
  api.name = "fake";
  api.version = "0";
  api.description = "in-process fake";
  api.modalities = EG_MODALITY_IMAGE;
  api.devices = EG_DEVICE_CPU;
  api.create = fake_create;
  api.destroy = fake_destroy;
  api.model_info = fake_model_info;
  api.budget_range = fake_budget_range;
  api.item_create = fake_item_create;
  api.item_destroy = fake_item_destroy;
  api.item_spec = fake_item_spec;
  api.buffer_shape = fake_shape;
  api.output_shape = fake_output_shape;
  api.workspace_size = fake_workspace;
  api.prepare_capture_inputs = fake_capture_inputs;
  api.prepare_replay_buffers = fake_replay;
  api.forward = fake_forward;
  // 1.1 entries, present in the struct whatever struct_size claims.
  api.prepare_capture_staging = fake_staging;
  api.output_shape_at = fake_shape;
  api.postprocess_outputs = fake_postprocess_outputs;
  // The 1.2 entry, likewise, and the 1.4 flags (a 1.2 table's size excludes them).
  api.item_spec_for_desc = fake_spec_for_desc;
  api.flags = EG_PLUGIN_CONCURRENT_ITEMS;
  return api;
}

void reset_scenario() {
  g = Fake{};
  g.info.out_hidden_size = 8;
  g.info.out_dtype = EG_DTYPE_F32;
  g.info.num_paths = 1;
  g.info.paths[0].name = "default";
  g.spec.input_size = 4;
  g.spec.output_tokens = 4;
  g.spec.frames = 1;
}

LoadedPlugin loaded(const eg_plugin_api& api) {
  LoadedPlugin p;
  p.name = "fake";
  p.api = &api;
  p.abi_major = api.abi_major;
  p.abi_minor = api.abi_minor;
  return p;
}

std::string instance_error(const eg_plugin_api& api) {
  try {
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Plugin);
    return e.what();
  }
  return "";
}

eg_output_info output(const char* name, int64_t width, int32_t dtype, int64_t rows = 0) {
  return eg_output_info{name, width, dtype, 0, rows};
}

// doctest cannot print function pointers: compare them to a bool.
template <class Fn>
bool present(Fn fn) {
  return fn != nullptr;
}
template <class Fn>
bool same(Fn a, Fn b) {
  return a == b;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a 1.0 table's 1.1 model-info fields are ignored and its one output is made up") {
  reset_scenario();
  // Garbage where a 1.0 plugin's struct ends: none of it may be taken.
  g.info.num_outputs = 5;
  g.info.outputs[0] = output("bogus", 3, EG_DTYPE_F16, 7);
  g.info.path_units[0] = "bogus";
  const eg_plugin_api api = fake_table(0, EG_PLUGIN_API_V1_0_SIZE);
  PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
  const eg_model_info& info = instance.info();
  CHECK(info.struct_size == sizeof(eg_model_info));
  REQUIRE(info.num_outputs == 1);
  CHECK(std::string(info.outputs[0].name) == "embeddings");
  CHECK(info.outputs[0].width == 8);
  CHECK(info.outputs[0].dtype == EG_DTYPE_F32);
  CHECK(info.outputs[0].rows_per_item == 0);
  CHECK(std::string(info.path_units[0]) == "tokens");
  REQUIRE(instance.outputs().size() == 1);
  CHECK(instance.outputs()[0].name == "embeddings");
  CHECK(instance.outputs()[0].width == 8);
  // The 1.1 entries lie past the table's struct_size: never read.
  CHECK_FALSE(present(instance.prepare_capture_staging()));
  CHECK_FALSE(present(instance.output_shape_at()));
  CHECK_FALSE(present(instance.postprocess_outputs()));
  CHECK_FALSE(present(instance.item_spec_for_desc()));
  CHECK_FALSE(instance.writes_path_tokens());
}

TEST_CASE("a 1.0-minor table of 1.1 size is still 1.0 for the model info") {
  reset_scenario();
  g.info.num_outputs = 2;
  g.info.outputs[0] = output("x", 8, EG_DTYPE_F32);
  g.info.outputs[1] = output("y", 4, EG_DTYPE_F32);
  const eg_plugin_api api = fake_table(0, EG_PLUGIN_API_V1_1_SIZE);
  PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
  CHECK(instance.info().num_outputs == 1);
  CHECK(instance.outputs()[0].name == "embeddings");
}

TEST_CASE("a 1.1 table: declared outputs and units are kept, NULL ones normalised") {
  reset_scenario();
  SUBCASE("no outputs declared: one, embeddings") {
    const eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    CHECK(instance.info().num_outputs == 1);
    CHECK(instance.outputs()[0].name == "embeddings");
    CHECK(std::string(instance.info().path_units[0]) == "tokens");
    CHECK(same(instance.prepare_capture_staging(), fake_staging));
    CHECK(same(instance.output_shape_at(), fake_shape));
    CHECK(same(instance.postprocess_outputs(), fake_postprocess_outputs));
    CHECK_FALSE(present(instance.item_spec_for_desc()));  // past a 1.1 table's size
    CHECK(instance.writes_path_tokens());
  }
  SUBCASE("several outputs and a unit") {
    g.info.num_outputs = 3;
    g.info.outputs[0] = output("last_hidden", 8, EG_DTYPE_F32);
    g.info.outputs[1] = output("pooled", 16, EG_DTYPE_BF16, 1);
    g.info.outputs[2] = output("deepstack.0", 4, EG_DTYPE_F16);
    g.info.path_units[0] = "patches";
    const eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    REQUIRE(instance.outputs().size() == 3);
    CHECK(instance.outputs()[1].name == "pooled");
    CHECK(instance.outputs()[1].width == 16);
    CHECK(instance.outputs()[1].dtype == EG_DTYPE_BF16);
    CHECK(instance.outputs()[1].rows_per_item == 1);
    CHECK(instance.outputs()[2].name == "deepstack.0");
    CHECK(std::string(instance.info().path_units[0]) == "patches");
  }
  CHECK(g.destroys == g.creates);
}

TEST_CASE("bad output declarations are refused naming the plugin, the output and the fix") {
  reset_scenario();
  g.info.num_outputs = 2;
  g.info.outputs[0] = output("main", 8, EG_DTYPE_F32);
  g.info.outputs[1] = output("extra", 4, EG_DTYPE_F32);
  eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
  std::string expected;
  SUBCASE("too many") {
    g.info.num_outputs = EG_MAX_OUTPUTS + 1;
    expected = "declares 9 outputs; 1..8 are allowed";
  }
  SUBCASE("negative count") {
    g.info.num_outputs = -1;
    expected = "declares -1 outputs";
  }
  SUBCASE("a name with a space") {
    g.info.outputs[1].name = "an output";
    expected = "output 1 has no valid name";
  }
  SUBCASE("no name") {
    g.info.outputs[1].name = nullptr;
    expected = "output 1 has no valid name";
  }
  SUBCASE("a duplicate name") {
    g.info.outputs[1].name = "main";
    expected = "output 'main' is declared twice";
  }
  SUBCASE("no width") {
    g.info.outputs[1].width = 0;
    expected = "output 'extra' has width 0";
  }
  SUBCASE("an unknown dtype") {
    g.info.outputs[1].dtype = 42;
    expected = "output 'extra' has dtype 42, which is not an eg_dtype";
  }
  SUBCASE("negative rows per item") {
    g.info.outputs[1].rows_per_item = -2;
    expected = "output 'extra' has rows_per_item -2";
  }
  SUBCASE("a primary output that disagrees with out_hidden_size") {
    g.info.outputs[0].width = 9;
    expected = "output 'main' (outputs[0], the primary output) is 9 columns";
  }
  SUBCASE("a primary output with a fixed row count") {
    g.info.outputs[0].rows_per_item = 1;
    expected = "must match out_hidden_size (8), out_dtype (f32) and rows_per_item 0";
  }
  SUBCASE("several outputs without output_shape_at") {
    api.output_shape_at = nullptr;
    expected = "declares 2 outputs but no output_shape_at";
  }
  SUBCASE("an empty path unit") {
    g.info.path_units[0] = "";
    expected = "path_units[0] is empty";
  }
  SUBCASE("no output columns at all") {
    g.info.out_hidden_size = 0;
    expected = "declares out_hidden_size 0";
  }
  const std::string message = instance_error(api);
  CAPTURE(message);
  CHECK(contains(message, "plugin 'fake'"));
  CHECK(contains(message, expected));
  CHECK(g.destroys == g.creates);  // the instance is destroyed on refusal
}

TEST_CASE("make_item: specs are zeroed, 1.0 path tokens filled in, bad specs refused") {
  reset_scenario();
  eg_item_desc desc{};
  desc.frames = 1;
  SUBCASE("1.0, one path: path_tokens[0] is output_tokens") {
    g.spec.path_tokens[0] = 99;  // a 1.0 plugin need not write it
    const eg_plugin_api api = fake_table(0, EG_PLUGIN_API_V1_0_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    eg_item_spec spec{};
    eg_item* item = instance.make_item(desc, spec);
    CHECK(item != nullptr);
    CHECK(spec.path_tokens[0] == 4);
    api.item_destroy(instance.handle(), item);
  }
  SUBCASE("1.1, one path: path_tokens[0] is the plugin's, in its unit") {
    g.spec.path_tokens[0] = 16;
    g.spec.path_tokens[2] = 5;  // past num_paths: ignored
    const eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    eg_item_spec spec{};
    eg_item* item = instance.make_item(desc, spec);
    CHECK(spec.path_tokens[0] == 16);
    CHECK(spec.path_tokens[2] == 0);
    api.item_destroy(instance.handle(), item);
  }
  SUBCASE("refusals destroy the item") {
    const eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    auto refused = [&](const std::string& expected) {
      eg_item_spec spec{};
      const int destroyed = g.item_destroys;
      std::string message;
      try {
        instance.make_item(desc, spec);
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Plugin);
        message = e.what();
      }
      CAPTURE(message);
      CHECK(contains(message, "plugin 'fake': item_spec"));
      CHECK(contains(message, expected));
      CHECK(g.item_destroys == destroyed + 1);
    };
    g.spec.path_tokens[0] = 4;
    g.spec.frames = 0;
    refused("frames = 0; an item has at least one frame");
    g.spec.frames = 1;
    g.spec.path_tokens[0] = -1;
    refused("path_tokens[0] = -1 for path 'default' (tokens)");
    g.spec.path_tokens[0] = 0;
    refused("writes path_tokens[p] for every path, one path included");
    g.spec.path_tokens[0] = 4;
    g.spec.output_tokens = -3;
    refused("negative size");
  }
  CHECK(g.items == g.item_destroys);
}

TEST_CASE("spec_for: a 1.2 table's item_spec_for_desc, normalised, no item made") {
  reset_scenario();
  const uint8_t pixel = 7;
  eg_item_desc desc{};
  desc.frames = 1;
  desc.height = 28;
  desc.pixels = &pixel;
  g.desc_spec = g.spec;
  g.desc_spec.path_tokens[0] = 4;
  g.desc_spec.path_tokens[3] = 9;  // past num_paths: zeroed as make_item's
  const eg_plugin_api api = fake_table(2, EG_PLUGIN_API_V1_2_SIZE);
  PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
  REQUIRE(same(instance.item_spec_for_desc(), fake_spec_for_desc));
  const eg_item_spec spec = instance.spec_for(desc);
  CHECK(g.spec_for_desc_calls == 1);
  CHECK(g.items == 0);
  CHECK(g.last_pixels == nullptr);  // the pixels are never the plugin's to read here
  CHECK(spec.input_size == 4);
  CHECK(spec.output_tokens == 4);
  CHECK(spec.path_tokens[0] == 4);
  CHECK(spec.path_tokens[3] == 0);

  SUBCASE("its spec is checked as item_spec's, naming the call") {
    g.desc_spec.frames = 0;
    std::string message;
    try {
      instance.spec_for(desc);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Plugin);
      message = e.what();
    }
    CAPTURE(message);
    CHECK(contains(message, "plugin 'fake': item_spec_for_desc gave frames = 0"));
  }
}

TEST_CASE("spec_for: without the 1.2 entry, a synthetic item's spec (pixels NULL), destroyed") {
  reset_scenario();
  const uint8_t pixel = 7;
  eg_item_desc desc{};
  desc.frames = 1;
  desc.pixels = &pixel;
  SUBCASE("1.1 table") {
    const eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    g.spec.path_tokens[0] = 4;
    const eg_item_spec spec = instance.spec_for(desc);
    CHECK(spec.path_tokens[0] == 4);
  }
  SUBCASE("1.0 table: path_tokens[0] from output_tokens, as make_item's") {
    const eg_plugin_api api = fake_table(0, EG_PLUGIN_API_V1_0_SIZE);
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    const eg_item_spec spec = instance.spec_for(desc);
    CHECK(spec.path_tokens[0] == 4);
  }
  SUBCASE("1.2 table leaving the entry NULL") {
    eg_plugin_api api = fake_table(2, EG_PLUGIN_API_V1_2_SIZE);
    api.item_spec_for_desc = nullptr;
    PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
    g.spec.path_tokens[0] = 4;
    CHECK(instance.spec_for(desc).path_tokens[0] == 4);
  }
  CHECK(g.spec_for_desc_calls == 0);
  CHECK(g.items == 1);
  CHECK(g.item_destroys == 1);
  CHECK(g.last_pixels == nullptr);
}

TEST_CASE("spec_for fails as make_item does: the same ErrorKind and message shape") {
  for (eg_status status : {EG_ERR_INVALID_ARGUMENT, EG_ERR_NOT_FOUND, EG_ERR_OUT_OF_MEMORY,
                           EG_ERR_UNSUPPORTED, EG_ERR_INTERNAL}) {
    for (uint32_t minor : {1u, 2u}) {
      CAPTURE(status);
      CAPTURE(minor);
      reset_scenario();
      g.item_status = status;
      const eg_plugin_api api =
          fake_table(minor, minor == 2 ? EG_PLUGIN_API_V1_2_SIZE : EG_PLUGIN_API_V1_1_SIZE);
      PluginInstance instance(loaded(api), EG_DEVICE_CPU, 0, "", {});
      eg_item_desc desc{};
      desc.frames = 1;
      desc.height = -5;
      ErrorKind made_kind{}, asked_kind{};
      std::string made, asked;
      try {
        eg_item_spec spec{};
        instance.make_item(desc, spec);
      } catch (const Error& e) {
        made_kind = e.kind();
        made = e.what();
      }
      try {
        instance.spec_for(desc);
      } catch (const Error& e) {
        asked_kind = e.kind();
        asked = e.what();
      }
      CAPTURE(made);
      CAPTURE(asked);
      REQUIRE_FALSE(made.empty());
      REQUIRE_FALSE(asked.empty());
      CHECK(asked_kind == made_kind);
      CHECK(contains(asked, "plugin 'fake': "));
      CHECK(contains(asked, "height -5 is refused"));
      // The call named: the plugin's entry, or item_create for the fallback.
      CHECK(contains(asked, minor == 2 ? "item_spec_for_desc failed (" : "item_create failed ("));
      CHECK(g.items == g.item_destroys);
    }
  }
}

namespace {

// A table whose last byte ends a readable page, the next page unmapped: reading
// one byte past `size` faults.
class GuardedTable {
 public:
  GuardedTable(const eg_plugin_api& api, size_t size) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    base_ = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base_ != MAP_FAILED);
    REQUIRE(::mprotect(static_cast<char*>(base_) + page, page, PROT_NONE) == 0);
    bytes_ = 2 * page;
    // Fields must stay 8-aligned: sizes here are multiples of 8.
    char* at = static_cast<char*>(base_) + page - size;
    std::memcpy(at, &api, size);
    table_ = reinterpret_cast<const eg_plugin_api*>(at);
  }
  ~GuardedTable() { ::munmap(base_, bytes_); }
  const eg_plugin_api* get() const { return table_; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  const eg_plugin_api* table_ = nullptr;
};

}  // namespace

TEST_CASE("loader: a 1.0-size table is read only inside its size and accepted") {
  const GuardedTable table(fake_table(0, EG_PLUGIN_API_V1_0_SIZE), EG_PLUGIN_API_V1_0_SIZE);
  const TableFacts facts = read_table(table.get());  // faults if it reads past 192 bytes
  CHECK(facts.null_functions.empty());
  CHECK(table_problem(facts) == "");
}

TEST_CASE("a 1.1-size table is accepted and its missing 1.2 entry never read") {
  reset_scenario();
  g.spec.path_tokens[0] = 4;
  const GuardedTable table(fake_table(1, EG_PLUGIN_API_V1_1_SIZE), EG_PLUGIN_API_V1_1_SIZE);
  CHECK(table_problem(read_table(table.get())) == "");  // faults if read past 216 bytes
  PluginInstance instance(loaded(*table.get()), EG_DEVICE_CPU, 0, "", {});
  CHECK_FALSE(present(instance.item_spec_for_desc()));
  eg_item_desc desc{};
  desc.frames = 1;
  CHECK(instance.spec_for(desc).input_size == 4);  // the synthetic item's
}

TEST_CASE("a 1.2-size table is accepted, its entry read") {
  reset_scenario();
  const GuardedTable table(fake_table(2, EG_PLUGIN_API_V1_2_SIZE), EG_PLUGIN_API_V1_2_SIZE);
  CHECK(table_problem(read_table(table.get())) == "");
  PluginInstance instance(loaded(*table.get()), EG_DEVICE_CPU, 0, "", {});
  CHECK(same(instance.item_spec_for_desc(), fake_spec_for_desc));
  CHECK_FALSE(instance.concurrent_items());  // the flags lie past 224 bytes: never read
}

TEST_CASE("a 1.4-size table's flags are read: concurrent item making only when declared") {
  reset_scenario();
  eg_plugin_api api = fake_table(4, EG_PLUGIN_API_V1_4_SIZE);
  SUBCASE("declared") {
    api.flags = EG_PLUGIN_CONCURRENT_ITEMS | (uint64_t{1} << 40);  // unknown bits ignored
    const GuardedTable table(api, EG_PLUGIN_API_V1_4_SIZE);
    CHECK(table_problem(read_table(table.get())) == "");
    PluginInstance instance(loaded(*table.get()), EG_DEVICE_CPU, 0, "", {});
    CHECK(instance.concurrent_items());
  }
  SUBCASE("not declared") {
    api.flags = uint64_t{1} << 40;
    const GuardedTable table(api, EG_PLUGIN_API_V1_4_SIZE);
    PluginInstance instance(loaded(*table.get()), EG_DEVICE_CPU, 0, "", {});
    CHECK_FALSE(instance.concurrent_items());
  }
}

TEST_CASE("loader: prepare_capture_inputs may be NULL only when prepare_capture_staging is set") {
  SUBCASE("1.1 table with staging, no capture inputs: accepted") {
    eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    api.prepare_capture_inputs = nullptr;
    const GuardedTable table(api, EG_PLUGIN_API_V1_1_SIZE);
    CHECK(table_problem(read_table(table.get())) == "");
  }
  SUBCASE("1.1 table with neither: refused, naming both") {
    eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    api.prepare_capture_inputs = nullptr;
    api.prepare_capture_staging = nullptr;
    const GuardedTable table(api, EG_PLUGIN_API_V1_1_SIZE);
    const std::string problem = table_problem(read_table(table.get()));
    CAPTURE(problem);
    CHECK(contains(problem, "provide prepare_capture_staging (1.1) or prepare_capture_inputs"));
  }
  SUBCASE("1.0 table without capture inputs: refused (staging lies past its size)") {
    eg_plugin_api api = fake_table(0, EG_PLUGIN_API_V1_0_SIZE);
    api.prepare_capture_inputs = nullptr;
    const GuardedTable table(api, EG_PLUGIN_API_V1_0_SIZE);
    const std::string problem = table_problem(read_table(table.get()));
    CAPTURE(problem);
    CHECK(contains(problem, "provide prepare_capture_staging (1.1) or prepare_capture_inputs"));
  }
  SUBCASE("another NULL required function keeps its own message") {
    eg_plugin_api api = fake_table(1, EG_PLUGIN_API_V1_1_SIZE);
    api.item_spec = nullptr;
    const GuardedTable table(api, EG_PLUGIN_API_V1_1_SIZE);
    CHECK(contains(table_problem(read_table(table.get())), "required function 'item_spec'"));
  }
}

TEST_CASE("the host services say their size and the item structs' sizes") {
  const eg_host_api* host = host_services();
  CHECK(host->struct_size == sizeof(eg_host_api));
  CHECK(host->item_desc_size == sizeof(eg_item_desc));
  CHECK(host->item_spec_size == sizeof(eg_item_spec));
  CHECK(eg_host_struct_size(host, 0) == sizeof(eg_item_desc));
  CHECK(eg_host_struct_size(host, 1) == sizeof(eg_item_spec));
}

TEST_CASE("tuning options reach plugins through the host table, checked by the runtime") {
  const eg_host_api* host = host_services();
  REQUIRE(EG_HAS_FIELD(host->struct_size, eg_host_api, tuning_option));
  RuntimeConfig cfg = test::toy_config("cpu");
  cfg.tuning = {{"cpu_threads", "2"}, {"cache_dir", "/tmp/encgraph-tuning-test"}};
  Runtime rt(cfg);
  CHECK(std::string(eg_host_tuning_option(host, "cpu_threads")) == "2");
  const char* dir = eg_host_tuning_option(host, "cache_dir");
  CHECK(std::string(dir) == "/tmp/encgraph-tuning-test");
  CHECK(eg_host_tuning_option(host, "nonsense") == nullptr);
  // A runtime made without them unsets them; a pointer handed out stays valid.
  cfg.tuning.clear();
  Runtime plain(cfg);
  CHECK(eg_host_tuning_option(host, "cpu_threads") == nullptr);
  CHECK(std::string(dir) == "/tmp/encgraph-tuning-test");
  // Bad values are Config errors naming the key, and change nothing.
  cfg.tuning = {{"cpu_threads", "3"}};
  Runtime three(cfg);
  for (const auto& [key, value, detail] :
       {std::tuple<std::string, std::string, std::string>{"cpu_threads", "0", "must be an integer"},
        {"cpu_threads", "2x", "must be an integer"},
        {"cpu_threads", "1025", "must be an integer in [1, 1024]"},
        {"cache_dir", "", "is empty"},
        {"threads", "2", "is not a tuning option (known: cpu_threads, cache_dir)"}}) {
    CAPTURE(value);
    cfg.tuning = {{key, value}};
    try {
      Runtime bad(cfg);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
      CHECK(e.key() == "plugin.tuning." + key);
      CHECK(contains(e.detail(), detail));
    }
    CHECK(std::string(eg_host_tuning_option(host, "cpu_threads")) == "3");
  }
}

TEST_CASE("accumulate sums counts, recomputes rates and keeps one rank's plan") {
  Stats a, b;
  a.graph_hits = 3;
  a.graph_misses = 1;
  a.num_graphs = 4;
  a.token_budgets = {64, 128};
  a.real_tokens = 50;
  a.budget_tokens = 100;
  a.batches_graph = 2;
  a.capture_seconds = 1.5;
  a.capture_phases.warmup = 1.0;
  a.paths = {PathStats{"default", "patches", 4, 2, 1, {}, 50, 100}};
  a.paths[0].eager_by_reason[static_cast<int>(EagerReason::TooLarge)] = 1;
  b.graph_hits = 1;
  b.graph_misses = 3;
  b.num_graphs = 4;
  b.real_tokens = 30;
  b.budget_tokens = 60;
  b.batches_eager = 3;
  b.batches_mixed = 1;
  b.capture_seconds = 2.0;
  b.capture_phases.warmup = 0.5;
  b.capture_phases.calibrate = 1.5;
  b.paths = {PathStats{"default", "patches", 4, 0, 3, {}, 30, 60}};
  b.paths[0].eager_by_reason[static_cast<int>(EagerReason::TooLarge)] = 2;
  Stats sum;
  accumulate(sum, a);
  accumulate(sum, b);
  CHECK(sum.graph_hits == 4);
  CHECK(sum.graph_misses == 4);
  CHECK(sum.hit_rate == doctest::Approx(0.5));
  CHECK(sum.num_graphs == 4);
  CHECK(sum.token_budgets == std::vector<int64_t>{64, 128});
  CHECK(sum.padded_token_efficiency == doctest::Approx(0.5));
  CHECK(sum.batches_graph == 2);
  CHECK(sum.batches_eager == 3);
  CHECK(sum.batches_mixed == 1);
  CHECK(sum.capture_seconds == doctest::Approx(2.0));
  // The phases of the capture reported: the slower rank's, not a mix.
  CHECK(sum.capture_phases.warmup == doctest::Approx(0.5));
  CHECK(sum.capture_phases.calibrate == doctest::Approx(1.5));
  REQUIRE(sum.paths.size() == 1);
  CHECK(sum.paths[0].unit == "patches");
  CHECK(sum.paths[0].graphs == 4);
  CHECK(sum.paths[0].batches_eager == 4);
  CHECK(sum.paths[0].eager_by_reason[static_cast<int>(EagerReason::TooLarge)] == 3);
  CHECK(sum.paths[0].real_tokens == 80);
}

TEST_CASE("every eager reason has a name") {
  CHECK(std::string(eager_reason_name(EagerReason::GraphsOff)) == "graphs off");
  CHECK(std::string(eager_reason_name(EagerReason::TooLarge)) == "too large");
  CHECK(std::string(eager_reason_name(EagerReason::TooManyFrames)) == "too many frames");
  CHECK(std::string(eager_reason_name(EagerReason::NoGraphForAxis)) == "no graph for axis keys");
  CHECK(std::string(eager_reason_name(EagerReason::ChosenFaster)) == "chosen as faster");
}
