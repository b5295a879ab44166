// Helpers of the Qwen2.5-VL suites: a tiny model written to a temporary
// checkpoint, runtime configurations for it, items from pixels, and error norms.
#pragma once

#include "../test_support.hpp"
#include "qwen_reference.hpp"

#include <encgraph/runtime.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace qwen_test {

// A fresh directory under the system temp folder, removed at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ =
        std::filesystem::temp_directory_path() /
        ("encgraph-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

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

// ||a - b|| / ||b||
inline double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = (i < a.size() ? static_cast<double>(a[i]) : 0.0) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return a.size() == b.size() ? std::sqrt(num / den) : INFINITY;
}

inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_error(a, std::vector<double>(b.begin(), b.end()));
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace qwen_test
