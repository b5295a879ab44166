/* Runtime options of the sanitizer build (ENCGRAPH_SANITIZE), compiled into
 * every executable of that build. ASAN_OPTIONS / UBSAN_OPTIONS in the
 * environment still override them.
 *
 * allocator_may_return_null=1: tests that ask for absurd sizes on purpose
 * (a huge workload.count, a header claiming terabytes) must see the failure
 * the code handles (malloc returns NULL, new throws std::bad_alloc), not an
 * allocator abort. */
const char* __asan_default_options(void);
const char* __ubsan_default_options(void);

const char* __asan_default_options(void) {
  return "allocator_may_return_null=1:check_initialization_order=1";
}

const char* __ubsan_default_options(void) {
  return "print_stacktrace=1";
}
