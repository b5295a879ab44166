// The eg_create_params a plugin's parse_options reads, for the CPU with
// `weights` and key/value config entries: what the option suites of the
// model plugins hand to parse_options without going through a runtime.
#pragma once

#include <encgraph/plugin_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace encgraph::test {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// Points into `kv` and `weights`, which must outlive it (hence no copies).
class CpuCreateParams {
 public:
  CpuCreateParams(const KeyValues& kv, const std::string& weights) {
    for (const auto& [k, v] : kv) entries_.push_back({k.c_str(), v.c_str()});
    params_.struct_size = sizeof(params_);
    params_.device = EG_DEVICE_CPU;
    params_.weights = weights.c_str();
    params_.config = entries_.data();
    params_.num_config = static_cast<int64_t>(entries_.size());
  }
  CpuCreateParams(const CpuCreateParams&) = delete;
  CpuCreateParams& operator=(const CpuCreateParams&) = delete;
  const eg_create_params* get() const { return &params_; }

 private:
  std::vector<eg_config_entry> entries_;
  eg_create_params params_{};
};

}  // namespace encgraph::test
