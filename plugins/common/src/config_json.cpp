#include <egk/config_json.hpp>
#include <egk/error.hpp>

#include <fstream>
#include <sstream>

namespace egk {

VisionConfigJson::VisionConfigJson(const std::string& path, const std::string& plugin)
    : path_(path), where_("config_json '" + path + "' vision_config.") {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(EG_ERR_NOT_FOUND, plugin + ": config_json '" + path + "' cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  Json doc = Json::parse(ss.str(), "config_json '" + path + "'");
  const Json* v = doc.find("vision_config");
  if (!v) v = &doc;
  if (!v->is_object())
    fail(EG_ERR_INVALID_ARGUMENT, "config_json '" + path + "': vision_config is not an object");
  section_ = *v;
}

void VisionConfigJson::read_int(const char* key, int64_t& dst) const {
  if (const Json* j = find(key)) dst = j->as_int(where_ + key);
}

}  // namespace egk
