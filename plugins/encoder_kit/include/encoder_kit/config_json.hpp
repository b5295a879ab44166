// Reading the `config_json` key of a model plugin: the `vision_config` object of
// a Hugging Face config.json, or the whole file when it is a bare vision config.
// Errors name the file and the key, so a bad checkpoint config is easy to find.
#pragma once

#include <encoder_kit/json.hpp>

#include <cstdint>
#include <string>

namespace encoder_kit {

class VisionConfigJson {
 public:
  // Throws Error(INVALID_ARGUMENT) naming "<plugin>: [plugin.config]
  // config_json" and the file when it is missing, not a regular file, over
  // kMaxJsonInputBytes, not JSON, or its vision_config is no object.
  VisionConfigJson(const std::string& path, const std::string& plugin);

  const std::string& path() const { return path_; }
  // "config_json '<path>' vision_config.": what errors put before a key.
  const std::string& where() const { return where_; }
  // The key's value in vision_config, or nullptr.
  const Json* find(const char* key) const { return section_.find(key); }
  // Sets dst to the key's integer; leaves it when the key is absent.
  void read_int(const char* key, int64_t& dst) const;

 private:
  std::string path_;
  std::string where_;
  Json section_;
};

}  // namespace encoder_kit
