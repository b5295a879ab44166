// Helpers of the Qwen2.5-VL suites: runtime configurations for a tiny model
// and items from pixels (scratch folders and error norms: plugin_test_support.hpp).
#pragma once

#include "../plugin_test_support.hpp"
#include "../test_support.hpp"
#include "qwen_reference.hpp"

#include <encgraph/runtime.hpp>

#include <string>
#include <vector>

namespace qwen_test {

using encgraph::test::all_finite;
using encgraph::test::rel_error;
using encgraph::test::TempDir;

inline encgraph::RuntimeConfig runtime_config(const qwen_ref::Config& c, const std::string& device,
                                              const std::string& weights) {
  encgraph::RuntimeConfig rc;
  rc.plugin = "qwen2_5_vl";
  rc.plugin_dirs = encgraph::test::plugin_dirs();
  rc.device = device;
  rc.weights = weights;
  rc.plugin_config = qwen_ref::plugin_config(c);
  rc.stats_log_interval = 0;
  // Graph hit counts in tests must not depend on timings (the runtime may run a
  // batch eagerly when it measures that as faster).
  rc.prefer_faster_path = false;
  return rc;
}

inline eg_item_desc pixel_item(const std::vector<uint8_t>& px, int64_t frames, int64_t h,
                               int64_t w) {
  eg_item_desc d{};
  d.modality = frames > 1 ? EG_MODALITY_VIDEO : EG_MODALITY_IMAGE;
  d.channels = 3;
  d.height = h;
  d.width = w;
  d.frames = frames;
  d.pixels = px.data();
  return d;
}

}  // namespace qwen_test
