// The ABI header compiles as C99 and as C++ (the strict flags are on the
// loader_header_check library); both languages agree on every layout value and
// both equal the values ABI 1.2 freezes; the size helpers read the right bytes.
#include "header_layout.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

struct Entry {
  const char* expression;
  size_t frozen;
};

std::vector<Entry> frozen_layout() {
  std::vector<Entry> out;
#define EG_ENTRY(e, v) out.push_back({#e, static_cast<size_t>(v)});
  EG_LAYOUT(EG_ENTRY)
#undef EG_ENTRY
  return out;
}

}  // namespace

TEST_CASE("C99 and C++ see the frozen ABI layout, every struct and field") {
  std::vector<size_t> c(EG_LAYOUT_COUNT, 0), cxx(EG_LAYOUT_COUNT, 1);
  eg_layout_as_c(c.data());
  eg_layout_as_cxx(cxx.data());
  const std::vector<Entry> frozen = frozen_layout();
  REQUIRE(frozen.size() == static_cast<size_t>(EG_LAYOUT_COUNT));
  for (int i = 0; i < EG_LAYOUT_COUNT; ++i) {
    CAPTURE(frozen[i].expression);
    CHECK(c[i] == cxx[i]);
    CHECK(c[i] == frozen[i].frozen);
  }
}

TEST_CASE("the layout list covers every struct of the header") {
  const std::vector<Entry> frozen = frozen_layout();
  for (const char* type :
       {"eg_error", "eg_tensor", "eg_config_entry", "eg_host_api", "eg_path_info",
        "eg_capture_axis", "eg_buffer_info", "eg_output_info", "eg_model_info", "eg_item_spec",
        "eg_item_desc", "eg_create_params", "eg_graph_shape", "eg_forward_args", "eg_replay_buffer",
        "eg_plugin_api"}) {
    CAPTURE(type);
    bool found = false;
    for (const Entry& e : frozen)
      found = found || std::string(e.expression) == "sizeof(" + std::string(type) + ")";
    CHECK(found);
  }
}

TEST_CASE("the minor sizes end where their fields end") {
  CHECK(EG_FIELD_END(eg_plugin_api, prepare_device) == EG_PLUGIN_API_V1_0_SIZE);
  CHECK(EG_FIELD_END(eg_plugin_api, postprocess_outputs) == EG_PLUGIN_API_V1_1_SIZE);
  CHECK(EG_FIELD_END(eg_plugin_api, item_spec_for_desc) == EG_PLUGIN_API_V1_2_SIZE);
  CHECK(EG_FIELD_END(eg_plugin_api, flags) == EG_PLUGIN_API_V1_4_SIZE);
  CHECK(sizeof(eg_plugin_api) == EG_PLUGIN_API_V1_4_SIZE);
  CHECK(EG_FIELD_END(eg_host_api, log) == EG_HOST_API_V1_0_SIZE);
  CHECK(offsetof(eg_model_info, num_outputs) == EG_MODEL_INFO_V1_0_SIZE);
  CHECK(offsetof(eg_forward_args, outputs) == EG_FORWARD_ARGS_V1_0_SIZE);
  CHECK(sizeof(eg_item_desc) == EG_ITEM_DESC_V1_0_SIZE);
  CHECK(sizeof(eg_item_spec) == EG_ITEM_SPEC_V1_0_SIZE);
}

TEST_CASE("EG_HAS_FIELD: a field exists only when the size covers all of it") {
  CHECK(EG_HAS_FIELD(EG_PLUGIN_API_V1_0_SIZE, eg_plugin_api, prepare_device));
  CHECK_FALSE(EG_HAS_FIELD(EG_PLUGIN_API_V1_0_SIZE, eg_plugin_api, prepare_capture_staging));
  CHECK_FALSE(EG_HAS_FIELD(EG_PLUGIN_API_V1_0_SIZE + 7, eg_plugin_api, prepare_capture_staging));
  CHECK(EG_HAS_FIELD(EG_PLUGIN_API_V1_0_SIZE + 8, eg_plugin_api, prepare_capture_staging));
  CHECK(EG_HAS_FIELD(EG_PLUGIN_API_V1_1_SIZE, eg_plugin_api, postprocess_outputs));
  CHECK_FALSE(EG_HAS_FIELD(EG_PLUGIN_API_V1_1_SIZE, eg_plugin_api, item_spec_for_desc));
  CHECK(EG_HAS_FIELD(EG_PLUGIN_API_V1_2_SIZE, eg_plugin_api, item_spec_for_desc));
  CHECK_FALSE(EG_HAS_FIELD(EG_PLUGIN_API_V1_2_SIZE, eg_plugin_api, flags));
  CHECK(EG_HAS_FIELD(EG_PLUGIN_API_V1_4_SIZE, eg_plugin_api, flags));
  CHECK_FALSE(EG_HAS_FIELD(0, eg_host_api, abi_major));
  CHECK(EG_HAS_FIELD(4u, eg_host_api, abi_major));
}

TEST_CASE("eg_host_struct_size: 1.0 sizes from a 1.0 host table, the host's from a 1.1 one") {
  eg_host_api host{};
  host.abi_major = 1;
  host.abi_minor = 0;
  host.struct_size = EG_HOST_API_V1_0_SIZE;  // a 1.0 runtime's table ends before the sizes
  host.item_desc_size = 999;                 // not the host's: never read
  host.item_spec_size = 999;
  CHECK(eg_host_struct_size(&host, 0) == EG_ITEM_DESC_V1_0_SIZE);
  CHECK(eg_host_struct_size(&host, 1) == EG_ITEM_SPEC_V1_0_SIZE);
  host.struct_size = EG_HOST_API_V1_0_SIZE + 4;  // item_desc_size only: still 1.0
  CHECK(eg_host_struct_size(&host, 0) == EG_ITEM_DESC_V1_0_SIZE);
  host.abi_minor = 1;
  host.struct_size = sizeof(eg_host_api);
  host.item_desc_size = 64;
  host.item_spec_size = 72;
  CHECK(eg_host_struct_size(&host, 0) == 64);
  CHECK(eg_host_struct_size(&host, 1) == 72);
  CHECK(eg_host_struct_size(nullptr, 1) == EG_ITEM_SPEC_V1_0_SIZE);
}
