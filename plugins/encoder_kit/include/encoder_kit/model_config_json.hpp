// The top level of a vision-language model's config.json (beside its
// vision_config, which VisionConfigJson reads): the keys that say which tower
// layer feeds the projector and what the projector is. Errors name the plugin,
// the file and the key.
#pragma once

#include <encoder_kit/json.hpp>

#include <cstdint>
#include <string>

namespace encoder_kit {

class ModelConfigJson {
 public:
  // Throws Error(INVALID_ARGUMENT) naming the file when it is unreadable or not JSON.
  ModelConfigJson(const std::string& path, const std::string& plugin);

  // "<plugin>: config_json '<path>' ": what errors put before a key.
  const std::string& at() const { return at_; }
  // The top-level key's value, or nullptr.
  const Json* find(const char* key) const { return top_.find(key); }
  // vision_feature_layer into dst when present; a list (several layers
  // concatenated) is Error(UNSUPPORTED).
  void read_feature_layer(int64_t& dst) const;
  // text_config.hidden_size into dst when present.
  void read_text_hidden_size(int64_t& dst) const;
  // Throws Error(UNSUPPORTED) "<at><key> must be \"<expected>\"<why>" when the
  // key is present with another string.
  void require_string(const char* key, const std::string& expected,
                      const std::string& why = "") const;

 private:
  std::string at_;
  Json top_;
};

// Throws Error(INVALID_ARGUMENT) naming the plugin when vision_feature_layer
// `layer` indexes no entry of hidden_states (the embeddings plus one entry per
// layer of a tower of `num_layers`; negative counts from the end).
void require_feature_layer(const std::string& plugin, int64_t layer, int64_t num_layers);

}  // namespace encoder_kit
