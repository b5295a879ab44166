/* Compiled with -std=c99 -pedantic -Werror -Wall -Wextra: the ABI header must be
 * plain C99 for plugins written in C. */
#include "header_layout.h"

#define EG_STORE(e, v) out[i++] = (size_t)(e);

void eg_layout_as_c(size_t* out) {
  size_t i = 0;
  EG_LAYOUT(EG_STORE)
}
