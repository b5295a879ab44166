/* A well-formed shared library named like a plugin that exports a function, but
 * not the entry symbol: the loader must say so rather than crash or skip it
 * silently. */
__attribute__((visibility("default"))) int encgraph_plugin_entry_misspelled(void) {
  return 1;
}
