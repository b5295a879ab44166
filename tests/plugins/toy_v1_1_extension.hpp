// The "toy_v1_1" test plugin: the toy with an ABI 1.1 table (216 bytes, minor
// 1, no item_spec_for_desc), so Runtime::spec_for's fallback for plugins built
// before 1.2 (a synthetic item made and its spec read) stays tested. Included
// by plugins/toy/toy_plugin.cpp (TOY_EXTENSION); built by tests/plugins, never
// installed.
#pragma once

struct Extension : ExtensionDefaults {
  static constexpr bool kV1_1Table = true;
};
