/* A static library compiled with default visibility, linked into the test
 * plugins: its symbol would leak out of a plugin without the version script,
 * which is exactly what the export test checks. */
int loader_test_helper_one(void);

int loader_test_helper_one(void) {
  return 1;
}
