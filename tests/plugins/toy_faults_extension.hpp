// The "toy_faults" test plugin: the toy plus switches that make it fail on
// purpose, for the runtime's error paths. Included by plugins/toy/toy_plugin.cpp
// (TOY_EXTENSION) inside its anonymous namespace, after its helpers; built by
// tests/plugins/CMakeLists.txt, never installed.
#pragma once

struct Extension : ExtensionDefaults {
  struct Config {
    int64_t huge_workspace_from = 0;  // budgets >= this ask for an impossible workspace
    int64_t workspace_per_token = 0;  // extra scratch bytes per budget token (memory tests)
    int64_t fail_forward_at = 0;      // forward fails at this budget
    bool illegal_sync = false;        // forward synchronises the device (illegal in capture)
    int64_t spec_for_desc_skew = 0;   // added to item_spec_for_desc's input_size (a lie)
    bool fail_spec_for_desc = false;  // item_spec_for_desc fails where item_create does not
  };

  static bool parse(Config& c, const std::string& key, const char* k, const char* v) {
    if (key == "huge_workspace_from") {
      c.huge_workspace_from = parse_int(k, v);
      require_in_range(k, c.huge_workspace_from, 0, INT64_MAX);
    } else if (key == "workspace_per_token") {
      c.workspace_per_token = parse_int(k, v);
      require_in_range(k, c.workspace_per_token, 0, int64_t{1} << 30);
    } else if (key == "fail_forward_at") {
      c.fail_forward_at = parse_int(k, v);
      require_in_range(k, c.fail_forward_at, 0, INT64_MAX);
    } else if (key == "illegal_sync") {
      c.illegal_sync = parse_bool(k, v);
    } else if (key == "spec_for_desc_skew") {
      c.spec_for_desc_skew = parse_int(k, v);
      require_in_range(k, c.spec_for_desc_skew, 0, int64_t{1} << 30);
    } else if (key == "fail_spec_for_desc") {
      c.fail_spec_for_desc = parse_bool(k, v);
    } else {
      return false;
    }
    return true;
  }

  static constexpr const char* kKeys =
      ", huge_workspace_from, workspace_per_token, fail_forward_at, illegal_sync, "
      "spec_for_desc_skew, fail_spec_for_desc";

  static void after_spec_for_desc(const Config& c, eg_item_spec* spec) {
    if (c.fail_spec_for_desc)
      fail(EG_ERR_INVALID_ARGUMENT, "item_spec_for_desc asked to fail (fail_spec_for_desc)");
    spec->input_size += c.spec_for_desc_skew;
  }

  static size_t workspace_bytes(const Config& c, const eg_graph_shape* s) {
    if (c.huge_workspace_from > 0 && s->token_budget >= c.huge_workspace_from)
      return size_t{1} << 50;  // no machine has this: exercises out-of-memory handling
    return static_cast<size_t>(
        checked_mul(c.workspace_per_token, s->token_budget, "the workspace size"));
  }

  static void before_forward(const Config& c, const eg_forward_args* a, int32_t device) {
    if (c.fail_forward_at > 0 && a->shape.token_budget == c.fail_forward_at)
      fail(EG_ERR_INTERNAL,
           "forward asked to fail at budget " + std::to_string(a->shape.token_budget));
#ifdef TOY_HAVE_CUDA
    // Synchronising inside a capture invalidates it; the error is ignored on purpose.
    if (c.illegal_sync && device == EG_DEVICE_CUDA) (void)cudaDeviceSynchronize();
#else
    (void)device;
#endif
  }
};
