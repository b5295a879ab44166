// Compiled as C++20 with -pedantic -Werror -Wall -Wextra: the ABI header must
// also be valid, warning-free C++ with the same layout as in C.
#include "header_layout.h"

#define EG_STORE(e, v) out[i++] = static_cast<size_t>(e);

extern "C" void eg_layout_as_cxx(size_t* out) {
  size_t i = 0;
  EG_LAYOUT(EG_STORE)
}
