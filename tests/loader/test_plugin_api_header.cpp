// The ABI header compiles as C99 and as C++ (the strict flags are on the
// loader_header_check library) and both languages agree on every layout value.
#include "header_layout.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

TEST_CASE("C99 and C++ see the same ABI layout") {
  std::vector<size_t> c(EG_LAYOUT_COUNT, 0), cxx(EG_LAYOUT_COUNT, 1);
  eg_layout_as_c(c.data());
  eg_layout_as_cxx(cxx.data());
  for (int i = 0; i < EG_LAYOUT_COUNT; ++i) {
    CAPTURE(i);  // the position in EG_LAYOUT of a mismatch
    CHECK(c[i] == cxx[i]);
  }
}

TEST_CASE("the v1.0 plugin table keeps its frozen size in both languages") {
  std::vector<size_t> c(EG_LAYOUT_COUNT);
  eg_layout_as_c(c.data());
  // sizeof(eg_plugin_api) as recorded from C; the header's static_asserts pin
  // the C++ side at compile time already.
  size_t i = 0, plugin_api_size = 0, v1_size = 0;
#define EG_FIND(e)                                                        \
  if (std::string(#e) == "sizeof(eg_plugin_api)") plugin_api_size = c[i]; \
  if (std::string(#e) == "EG_PLUGIN_API_V1_0_SIZE") v1_size = c[i];       \
  ++i;
  EG_LAYOUT(EG_FIND)
#undef EG_FIND
  CHECK(plugin_api_size == 192);
  CHECK(v1_size == 192);
  CHECK(sizeof(eg_plugin_api) == EG_PLUGIN_API_V1_0_SIZE);
}
