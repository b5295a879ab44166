// Shared helpers of the core's test suites: plugin folders, runtime set-up,
// GPU presence (GPU suites exit 77, "skipped", without one unless
// ENCGRAPH_REQUIRE_GPU=1 demands a GPU).
#pragma once

#include <encgraph/error.hpp>
#include <encgraph/runtime.hpp>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace encgraph::test {

// Where the in-tree plugins are: the shipped ones, then the test plugins
// (never installed, in a folder of their own). ENCGRAPH_PLUGIN_PATH (set on
// the GPU machine) is searched by the registry anyway.
inline std::vector<std::filesystem::path> plugin_dirs() {
  std::vector<std::filesystem::path> dirs;
#ifdef ENCGRAPH_TEST_PLUGIN_DIR
  dirs.emplace_back(ENCGRAPH_TEST_PLUGIN_DIR);
#endif
#ifdef ENCGRAPH_TEST_TEST_PLUGIN_DIR
  dirs.emplace_back(ENCGRAPH_TEST_TEST_PLUGIN_DIR);
#endif
  return dirs;
}

inline RuntimeConfig toy_config(const std::string& device, const std::string& plugin = "toy") {
  RuntimeConfig c;
  c.plugin = plugin;
  c.plugin_dirs = plugin_dirs();
  c.device = device;
  // Hit counts in tests must not depend on timings; one test turns it on.
  c.prefer_faster_path = false;
  return c;
}

inline void set(RuntimeConfig& c, const std::string& key, const std::string& value) {
  c.plugin_config.emplace_back(key, value);
}

inline eg_item_desc image(int64_t h, int64_t w, uint64_t seed) {
  eg_item_desc d{};
  d.modality = EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = h;
  d.width = w;
  d.frames = 1;
  d.seed = seed;
  return d;
}

inline eg_item_desc video(int64_t h, int64_t w, int64_t frames, uint64_t seed) {
  eg_item_desc d = image(h, w, seed);
  d.modality = EG_MODALITY_VIDEO;
  d.frames = frames;
  return d;
}

// The message of the encgraph::Error `fn` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace encgraph::test
