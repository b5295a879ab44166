// The kit's configuration pieces on the SDK's reader (sdk::Config): the keys
// every model plugin shares (dtype, check_finite) and the size keys that a
// checkpoint folder's config.json may also set. ComputeDtype and
// require_in_range come from encoder_kit/config.hpp, whose ConfigReader these
// replace for plugins on the SDK.
#pragma once

#include <encoder_kit/config.hpp>

#include <encgraph/sdk/config.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace encoder_kit {

// The `dtype` key ("f32"/"float32", "bf16"/"bfloat16"; default by `device`).
// Throws Error(INVALID_ARGUMENT) when the device's path does not compute in it.
ComputeDtype read_compute_dtype(encgraph::sdk::Config& config, int32_t device);

// The key check_finite (default true): whether a checkpoint's NaN or infinite
// weights are an error (see encoder_kit::WeightSource).
bool read_check_finite(encgraph::sdk::Config& config);

// Keys that may also come from a checkpoint folder's config.json: a key
// overrides the value read from the file, except that a key contradicting the
// folder's OWN config.json (folder_config non-empty: the weights beside it
// have its sizes) is an error naming both. With no folder config (empty), keys
// simply override. Values are left unbounded here: the model's validate()
// bounds them wherever they came from.
class CheckpointKeys {
 public:
  CheckpointKeys(encgraph::sdk::Config& config, std::string folder_config)
      : config_(config), folder_config_(std::move(folder_config)) {}
  void dim(const char* key, int64_t& value) const;
  void int_list(const char* key, std::vector<int64_t>& value) const;

 private:
  encgraph::sdk::Config& config_;
  std::string folder_config_;
};

}  // namespace encoder_kit
