// env_switch_on: only "0" turns a switch off.
#include <encoder_kit/env_switch.hpp>
#include "kit_test_support.hpp"

#include <cstdlib>

TEST_CASE("env_switch_on: unset, empty and other values leave it on; \"0\" turns it off") {
  const char* name = "ENCGRAPH_TEST_ENV_SWITCH";
  unsetenv(name);
  CHECK(encoder_kit::env_switch_on(name));
  setenv(name, "", 1);
  CHECK(encoder_kit::env_switch_on(name));
  setenv(name, "1", 1);
  CHECK(encoder_kit::env_switch_on(name));
  setenv(name, "00", 1);  // not exactly "0"
  CHECK(encoder_kit::env_switch_on(name));
  setenv(name, "0", 1);
  CHECK_FALSE(encoder_kit::env_switch_on(name));
  unsetenv(name);
}
