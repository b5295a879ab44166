#include <encoder_kit/config_json.hpp>
#include <encoder_kit/error.hpp>
#include <encoder_kit/input_file.hpp>

namespace encoder_kit {

VisionConfigJson::VisionConfigJson(const std::string& path, const std::string& plugin)
    : path_(path), where_("config_json '" + path + "' vision_config.") {
  const std::string key = plugin + ": [plugin.config] config_json";
  const std::string text =
      read_text_input(path, key, "name a model's config.json (or a bare vision config)");
  Json doc = Json::parse(text, key + " '" + path + "'");
  if (!doc.is_object()) fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "' is not a JSON object");
  const Json* v = doc.find("vision_config");
  if (!v) v = &doc;
  if (!v->is_object())
    fail(EG_ERR_INVALID_ARGUMENT, key + " '" + path + "': vision_config is not an object");
  section_ = *v;
}

void VisionConfigJson::read_int(const char* key, int64_t& dst) const {
  if (const Json* j = find(key)) dst = j->as_int(where_ + key);
}

}  // namespace encoder_kit
