#include <encoder_kit/env_switch.hpp>

#include <cstdlib>
#include <cstring>

namespace encoder_kit {

bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace encoder_kit
