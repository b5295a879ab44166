/* A shared library that needs a symbol nobody provides. With RTLD_NOW the
 * dynamic loader refuses it at load time, and the loader must report that
 * refusal (naming the symbol) instead of failing later at a call. */
extern int eg_test_symbol_nobody_defines(void);

__attribute__((visibility("default"))) int encgraph_plugin_entry(void) {
  return eg_test_symbol_nobody_defines();
}
